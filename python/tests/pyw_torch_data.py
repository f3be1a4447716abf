"""A dataset module that imports torch at its top, as most do: the
forkserver tests' dataset whose code names torch."""
import torch.utils.data

import pyw_data


class ParentHasTorchDataset(pyw_data.ParentHasTorch, torch.utils.data.Dataset):
    """pyw_data.ParentHasTorch as a torch Dataset."""


def seed_torch(worker_id):
    """A worker_init_fn of a module that imports torch."""
    torch.manual_seed(worker_id)
