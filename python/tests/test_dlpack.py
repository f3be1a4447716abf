"""The DLPack structs as the spec lays them out (checked with ctypes, so no
consumer library is needed), both capsule kinds, and the numpy hand-off."""
import ctypes

import numpy as np
import pytest

import pinloader


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


def capsule(cap, name):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(cap, name)


@pytest.fixture
def field(indexed_records):
    ds, rec = indexed_records
    loader = pinloader.DataLoader(ds, batch_size=10, output="raw")
    idx, payload = next(iter(loader))
    return idx, payload, rec


def check_tensor(t, fa, ndim, code, bits, shape):
    assert t.device.device_type == 1 and t.device.device_id == 0  # kDLCPU
    assert t.ndim == ndim and t.byte_offset == 0
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (code, bits, 1)
    assert [t.shape[i] for i in range(ndim)] == list(shape)
    view = np.asarray(fa)
    assert t.data == view.ctypes.data  # the batch's memory itself
    assert [t.strides[i] for i in range(ndim)] == [s // view.itemsize for s in view.strides]


def test_unversioned_capsule_layout(field):
    idx, payload, _ = field
    cap = payload.__dlpack__()
    m = DLManagedTensor.from_address(capsule(cap, b"dltensor"))
    check_tensor(m.dl_tensor, payload, 2, 1, 8, (10, 3))  # kDLUInt 8
    assert m.deleter
    cap = idx.__dlpack__(stream=None)
    m = DLManagedTensor.from_address(capsule(cap, b"dltensor"))
    check_tensor(m.dl_tensor, idx, 1, 0, 64, (10,))  # kDLInt 64


def test_versioned_capsule_layout(field):
    _, payload, _ = field
    cap = payload.__dlpack__(max_version=(1, 0))
    m = DLManagedTensorVersioned.from_address(capsule(cap, b"dltensor_versioned"))
    assert (m.major, m.minor) == (1, 0) and m.flags == 0 and m.deleter
    check_tensor(m.dl_tensor, payload, 2, 1, 8, (10, 3))
    # A pre-1.0 request still gets the legacy capsule.
    cap = payload.__dlpack__(max_version=(0, 8))
    assert capsule(cap, b"dltensor")


def test_export_arguments(field):
    _, payload, _ = field
    assert payload.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        payload.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        payload.__dlpack__(dl_device=(2, 0))
    payload.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(ValueError):
        payload.__dlpack__(stream=0)


def test_numpy_handoff_shares_memory(field):
    _, payload, rec = field
    a = np.asarray(payload)
    assert a.shape == (10, 3) and a.dtype == np.uint8
    np.testing.assert_array_equal(a, rec["payload"][:10])
    if hasattr(np, "from_dlpack"):
        b = np.from_dlpack(payload)
        assert b.ctypes.data == a.ctypes.data
    assert payload.tobytes() == rec["payload"][:10].tobytes()
