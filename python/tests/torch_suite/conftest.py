# test_dataloader.py is run by run.py (with pinloader's DataLoader substituted,
# in child processes that skip conftest files), never collected directly by
# the pinloader suite: collected here it would test torch's own DataLoader.
collect_ignore = ["test_dataloader.py"]
