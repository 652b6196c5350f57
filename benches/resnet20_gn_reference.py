"""Reference point for privpred-nn: ResNet-20 with GroupNorm trained by PyTorch on a GPU.

privpred's own engine (crates/privpred-nn) runs on CPUs only. This script trains the same
architecture (type-A shortcuts, GroupNorm with min(32, channels) groups, SGD momentum 0.9,
batch 600, lr 0.1 divided by 10 three times at equal intervals, flip + 4-pixel-pad crop,
per-channel normalisation) on the same CIFAR-10 JPEG copy, to tell what accuracy the data and
schedule allow and how fast a GPU does it. It is not part of privpred and no test uses it.

    python3 benches/resnet20_gn_reference.py TARBALL --epochs 100 --out result.json [--time-limit-s S]

`--per-class TRAIN,TEST` keeps the first TRAIN and TEST images of each class in the tarball's
order (what `nn-train --per-class` keeps), for side-by-side loss curves on a CPU; the losses
of the first 200 steps are in `step_losses`, as in `nn-train`'s report.

Needs torch and pillow; no network.
"""

import argparse
import io
import json
import sys
import tarfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def load(tarball, per_class=None):
    data = {"train": ([], []), "test": ([], [])}
    kept = {}
    with tarfile.open(tarball, "r:gz") as tf:
        for m in tf:
            if not m.isfile() or not m.name.lower().endswith((".jpg", ".jpeg", ".png")):
                continue
            parts = m.name.split("/")
            split, cls = parts[-3], parts[-2]
            if per_class is not None:
                k = kept.get((split, cls), 0)
                if k >= per_class[0 if split == "train" else 1]:
                    continue
                kept[(split, cls)] = k + 1
            img = Image.open(io.BytesIO(tf.extractfile(m).read())).convert("RGB")
            data[split][0].append(np.asarray(img, dtype=np.uint8))
            data[split][1].append(CLASSES.index(cls))
    out = {}
    for s, (x, y) in data.items():
        out[s] = (np.stack(x), np.array(y, dtype=np.int64))
    return out


def gn(c):
    return nn.GroupNorm(min(32, c), c)


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.n1 = gn(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.n2 = gn(cout)
        self.stride, self.pad = stride, cout - cin

    def forward(self, x):
        o = F.relu(self.n1(self.c1(x)))
        o = self.n2(self.c2(o))
        s = x
        if self.stride != 1 or self.pad:
            s = x[:, :, :: self.stride, :: self.stride]
            s = F.pad(s, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(o + s)


class ResNet20(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.norm = gn(16)
        layers, cin = [], 16
        for cout, stride in [(16, 1), (32, 2), (64, 2)]:
            for i in range(3):
                layers.append(Block(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(64, 10)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = F.relu(self.norm(self.conv(x)))
        x = self.layers(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tarball")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--batch", type=int, default=600)
    ap.add_argument("--time-limit-s", type=float, default=1e9)
    ap.add_argument("--out", default="reference.json")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--per-class", default=None, metavar="TRAIN,TEST")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    per_class = tuple(int(v) for v in a.per_class.split(",")) if a.per_class else None
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(a.seed)
    t0 = time.time()
    d = load(a.tarball, per_class)
    load_s = time.time() - t0
    xtr = torch.tensor(d["train"][0]).permute(0, 3, 1, 2).float().div(255).to(dev)
    ytr = torch.tensor(d["train"][1]).to(dev)
    xte = torch.tensor(d["test"][0]).permute(0, 3, 1, 2).float().div(255).to(dev)
    yte = torch.tensor(d["test"][1]).to(dev)
    mean = xtr.mean((0, 2, 3), keepdim=True)
    std = xtr.std((0, 2, 3), keepdim=True)
    xtr, xte = (xtr - mean) / std, (xte - mean) / std
    model = ResNet20().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    n = xtr.shape[0]
    steps_per_epoch = (n + a.batch - 1) // a.batch
    total = a.epochs * steps_per_epoch
    step, log, t_train, step_losses = 0, [], time.time(), []
    # steady-state throughput: examples and time after the first WARM steps (cuDNN autotuning,
    # allocator warm-up); the time limit is checked after every step
    WARM, seen, t_warm, warm_seen, stop = 10, 0, None, 0, False
    for ep in range(a.epochs):
        model.train()
        perm = torch.randperm(n, device=dev)
        tot, cnt = 0.0, 0
        for i in range(steps_per_epoch):
            lr = a.lr * (0.1 ** min(3, (4 * step) // total))
            for g in opt.param_groups:
                g["lr"] = lr
            idx = perm[i * a.batch : (i + 1) * a.batch]
            x = xtr[idx]
            flip = torch.rand(x.shape[0], device=dev) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(3), x)
            x = F.pad(x, (4, 4, 4, 4))
            b = x.shape[0]
            dy = torch.randint(0, 9, (b, 1, 1, 1), device=dev)
            dx = torch.randint(0, 9, (b, 1, 1, 1), device=dev)
            ar = torch.arange(32, device=dev)
            x = x[
                torch.arange(b, device=dev)[:, None, None, None],
                torch.arange(3, device=dev)[None, :, None, None],
                dy + ar[None, None, :, None],
                dx + ar[None, None, None, :],
            ]
            loss = F.cross_entropy(model(x), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            tot += loss.item() * x.shape[0]
            if len(step_losses) < 200:
                step_losses.append(loss.item())
            cnt += x.shape[0]
            seen += x.shape[0]
            if step == WARM:
                t_warm, warm_seen = time.time(), seen
            if time.time() - t_train > a.time_limit_s:
                stop = True
                break
        log.append({"epoch": ep + 1, "train_loss": tot / cnt, "elapsed_s": time.time() - t_train})
        print(json.dumps(log[-1]), flush=True)
        if stop or time.time() - t_train > a.time_limit_s:
            break
    train_s = time.time() - t_train
    steady = (seen - warm_seen) / (time.time() - t_warm) if t_warm and seen > warm_seen else None
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, xte.shape[0], 1000):
            correct += (model(xte[i : i + 1000]).argmax(1) == yte[i : i + 1000]).sum().item()
    res = {
        "engine": f"PyTorch {torch.__version__} on {torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}",
        "epochs_run": len(log),
        "epochs_planned": a.epochs,
        "batch": a.batch,
        "train_s": train_s,
        "epochs_per_s": len(log) / train_s,
        "examples_per_s": seen / train_s,
        "steady_examples_per_s": steady,
        "steps": step,
        "test_accuracy": correct / xte.shape[0],
        "load_s": load_s,
        "per_epoch": log,
        "step_losses": step_losses,
        "lr": a.lr,
        "seed": a.seed,
        "per_class": a.per_class,
        "train_images": int(n),
        "note": "lr schedule over the planned epochs; stopped early (the last epoch possibly partial) if epochs_run < epochs_planned; steady_examples_per_s excludes the first 10 steps",
    }
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "per_epoch"}))


if __name__ == "__main__":
    sys.exit(main())
