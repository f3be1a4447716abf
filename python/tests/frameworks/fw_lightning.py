"""Lightning's Trainer.fit with pinloader loaders for train and val: two
epochs, the same per-step losses as with torch's loaders under the same
seeds; the loaders Lightning iterates are pinloader's (not remade); its
checkpoint holds pinloader's state_dict(); a fit resumed from a checkpoint
saved mid-epoch (step 3 of 8) loads it and trains on the batches the
uninterrupted fit had after step 3, the same losses. (Lightning restores a
loader's state only mid-epoch: an epoch-end checkpoint is not a restart.)"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import _fw  # noqa: E402
import pinloader  # noqa: E402

try:
    import lightning.pytorch as L
except ImportError:
    import pytorch_lightning as L


class Module(L.LightningModule):
    def __init__(self, kind):
        super().__init__()
        self.net = _fw.model()
        self.kind = kind
        self.losses, self.val_losses = [], []

    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.losses.append(loss.item())
        return loss

    def validation_step(self, batch, i):
        x, y = batch
        self.val_losses.append(torch.nn.functional.mse_loss(self.net(x), y).item())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return _fw.loader(self.kind, _fw.Data(), batch_size=8, shuffle=True)

    def val_dataloader(self):
        return _fw.loader(self.kind, _fw.Data(32), batch_size=8, shuffle=False)


MID_STEP = 3  # a checkpoint every 3 steps: step 3 is mid-epoch (8 steps each)


def trainer(root, epochs):
    every = L.callbacks.ModelCheckpoint(dirpath=os.path.join(root, "steps"), save_top_k=-1,
                                        every_n_train_steps=MID_STEP, filename="{step}")
    return L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, default_root_dir=root,
                     logger=False, enable_progress_bar=False, enable_model_summary=False,
                     deterministic=True, num_sanity_val_steps=2, callbacks=[every])


def fit(kind, root):
    L.seed_everything(0)
    m = Module(kind)
    t = trainer(root, 2)
    t.fit(m)
    return m, t


def main():
    root = tempfile.mkdtemp(prefix="pl-fw-")
    mt, _ = fit("torch", os.path.join(root, "torch"))
    mp, tp = fit("pinloader", os.path.join(root, "pinloader"))
    _fw.compare("lightning fit: train losses, 2 epochs", mt.losses, mp.losses)
    _fw.compare("lightning fit: val losses", mt.val_losses, mp.val_losses)
    tl, vl = tp.train_dataloader, tp.val_dataloaders
    _fw.check("lightning iterates pinloader's train loader (not remade)",
              type(tl) is pinloader.DataLoader and tl.stats()["batches_delivered"] > 0, repr(type(tl)))
    _fw.check("lightning iterates pinloader's val loader", type(vl) is pinloader.DataLoader, repr(type(vl)))
    # state_dict hooks: the checkpoint Lightning saved holds the loader's state
    ckpts = [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(root, "pinloader"))
             for f in fs if f.endswith(".ckpt")]
    _fw.check("lightning saved a checkpoint", bool(ckpts), str(ckpts))
    if not ckpts:
        return _fw.finish()
    ck = torch.load(ckpts[0], weights_only=False)
    text = repr(ck.get("loops", {}).get("fit_loop", {}).get("state_dict", {}))
    _fw.check("the checkpoint holds pinloader's state_dict()", pinloader.STATE_FORMAT in text, text[:300])
    loaded = []
    orig = pinloader.DataLoader.load_state_dict

    def spy(self, state):
        loaded.append(state)
        return orig(self, state)

    pinloader.DataLoader.load_state_dict = spy
    try:
        mid = os.path.join(root, "pinloader", "steps", "step=%d.ckpt" % MID_STEP)
        _fw.check("lightning saved a mid-epoch checkpoint", os.path.exists(mid),
                  str(sorted(os.listdir(os.path.dirname(mid))) if os.path.isdir(os.path.dirname(mid)) else []))
        L.seed_everything(0)
        m = Module("pinloader")
        if os.path.exists(mid):
            trainer(os.path.join(root, "resume"), 2).fit(m, ckpt_path=mid)
    finally:
        pinloader.DataLoader.load_state_dict = orig
    _fw.check("a fit resumed mid-epoch gave the train loader its state (load_state_dict)",
              len(loaded) >= 1, "%d calls: %s" % (len(loaded), repr(loaded)[:300]))
    _fw.compare("the resumed fit's losses are the uninterrupted fit's after step %d" % MID_STEP,
                mp.losses[MID_STEP:], m.losses)
    _fw.finish()


if __name__ == "__main__":
    main()
