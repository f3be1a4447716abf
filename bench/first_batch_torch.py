"""first_batch.py's datasets as torch Datasets, in a module that imports
torch at its top, as most dataset modules do: a spawned worker that
unpickles one imports torch (pinloader's and torch's alike), and a
forkserver's server preloads it (`first_batch.py --torch-dataset`)."""
import torch.utils.data

from first_batch import Objects, Small


class TorchSmall(Small, torch.utils.data.Dataset):
    """first_batch.Small, a torch Dataset."""


class TorchObjects(Objects, torch.utils.data.Dataset):
    """first_batch.Objects, a torch Dataset."""
