"""The loader's state in a torch.distributed.checkpoint (DCPState): every
rank's state_dict() (_state.py), gathered under one key.
"""
import io
import pickle

from ._state import _error


class DCPState:
    """The loader as a torch.distributed.checkpoint Stateful, one per rank:

        state = {"model": ..., "loader": pinloader.DCPState(loader).state_dict()}
        dcp.save_state_dict(state, dcp.FileSystemWriter(path))
        state = {"model": ..., "loader": pinloader.DCPState.placeholder()}
        dcp.load_state_dict(state, dcp.FileSystemReader(path))
        pinloader.DCPState(loader).load_state_dict(state["loader"])

    state_dict() is collective (every rank calls it, as DCP's planners do):
    it gathers every rank's loader state, so that each rank returns the same
    {"pinloader_ranks": bytes} (DCP writes values that are not sharded
    tensors from one rank only in torch 1.13, and deduplicates them by key
    in torch 2: a per-rank value under one key would keep one rank's). One
    key whatever the world size, so that a checkpoint's keys are the ones a
    loader under another world size asks for. load_state_dict() takes this
    rank's state; under another world size a loader's own order (seed=)
    resumes from rank 0's (its position counts the samples of all ranks
    together), any other state is refused."""

    KEY = "pinloader_ranks"

    def __init__(self, loader, group=None):
        self.loader, self.group = loader, group

    @classmethod
    def placeholder(cls):
        """What to put where the state will be loaded (its one key)."""
        return {cls.KEY: b""}

    def _rank_world(self):
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(self.group), dist.get_world_size(self.group)
        return 0, 1

    def state_dict(self):
        import torch.distributed as dist

        rank, world = self._rank_world()
        buf = io.BytesIO()
        pickle.dump(self.loader.state_dict(), buf, protocol=pickle.HIGHEST_PROTOCOL)
        blobs = [buf.getvalue()]
        if world > 1:
            blobs = [None] * world
            dist.all_gather_object(blobs, buf.getvalue(), group=self.group)
        return {self.KEY: pickle.dumps({"world_size": world, "ranks": blobs},
                                       protocol=pickle.HIGHEST_PROTOCOL)}

    def load_state_dict(self, state):
        rank, world = self._rank_world()
        saved = pickle.loads(state[self.KEY])
        blobs, saved_world = saved["ranks"], saved["world_size"]
        if saved_world != world or rank >= len(blobs):
            st = pickle.loads(blobs[0])
            if st.get("order") is not None:
                raise _error("load_state_dict(): the checkpoint was saved by %d ranks, this run has "
                             "%d: only the loader's own order (seed=) resumes under another world "
                             "size" % (saved_world, world))
        else:
            st = pickle.loads(blobs[rank])
        self.loader.load_state_dict(st)
