"""The HF Trainer with get_train_dataloader returning a pinloader loader
(not prepared by accelerate, so pinloader's loader is what iterates), two
epochs, the same per-step losses as the same Trainer returning torch's
DataLoader with the same arguments and seeds."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import _fw  # noqa: E402
import pinloader  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = _fw.model()

    def forward(self, x, labels=None):
        out = self.net(x)
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}


class LoaderTrainer(Trainer):
    def __init__(self, kind, **kw):
        super().__init__(**kw)
        self.kind, self.losses, self.loader = kind, [], None

    def get_train_dataloader(self):
        self.loader = _fw.loader(self.kind, self.train_dataset, batch_size=8, shuffle=True)
        return self.loader

    def compute_loss(self, model, inputs, return_outputs=False, **kw):
        out = super().compute_loss(model, inputs, return_outputs=return_outputs, **kw)
        loss = out[0] if return_outputs else out
        self.losses.append(loss.item())
        return out


def fit(kind):
    args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="hf-fw-"), num_train_epochs=2,
                             per_device_train_batch_size=8, learning_rate=0.1, lr_scheduler_type="constant",
                             optim="sgd", weight_decay=0.0, max_grad_norm=0.0, seed=0, report_to=[],
                             save_strategy="no", logging_strategy="no", use_cpu=True, disable_tqdm=True,
                             dataloader_num_workers=0)
    torch.manual_seed(0)
    t = LoaderTrainer(kind, model=Net(), args=args, train_dataset=_fw.DictData())
    t.train()
    return t


def main():
    tt, tp = fit("torch"), fit("pinloader")
    _fw.compare("HF Trainer: train losses, 2 epochs", tt.losses, tp.losses)
    _fw.check("HF Trainer iterated pinloader's loader",
              type(tp.loader) is pinloader.DataLoader and tp.loader.stats()["batches_delivered"] > 0,
              repr(type(tp.loader)))
    _fw.finish()


if __name__ == "__main__":
    main()
