"""The loss of one fixed batch over 140 steps: rn50's step against torch's own foreach SGD, by lr and
precision, on a GPU (issue 27). Usage: PYTHONPATH=. python3 benchmarks/probes/fixed_batch_probe.py > probe.jsonl"""
import json
import time

import torch
from rn50.recipe.train_step import build_train_step
from rn50.config.schema import OptimConfig

torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
rows = []
for precision, lr, wd, torch_sgd, seed in [
    ("amp", 0.1, 3.0517578125e-05, False, 0), ("amp", 0.1, 3.0517578125e-05, True, 0),
    ("amp", 0.1, 0.0, False, 0), ("amp", 0.1, 3.0517578125e-05, False, 1),
    ("amp", 0.05, 3.0517578125e-05, False, 0), ("amp", 0.025, 3.0517578125e-05, False, 0),
    ("bf16", 0.1, 3.0517578125e-05, False, 0), ("bf16", 0.05, 3.0517578125e-05, False, 0),
    ("amp_static", 0.1, 3.0517578125e-05, False, 0), ("amp_static", 0.05, 3.0517578125e-05, False, 0),
    ("tf32", 0.1, 3.0517578125e-05, False, 0),
]:
    torch.manual_seed(seed)
    t = build_train_step("resnet50", precision, dev, optim=OptimConfig(lr=lr, weight_decay=wd))
    if torch_sgd:  # torch's own foreach SGD, as the bare loop
        t.optimizer = torch.optim.SGD(t.net.parameters(), lr=lr, momentum=0.9, weight_decay=wd, foreach=True)
    images, labels = t.batch(256)
    t0 = time.time()
    losses = torch.stack([t(images, labels) for _ in range(140)]).tolist()
    skipped = t.scaler.take_skipped() if hasattr(t.scaler, "take_skipped") else []
    row = dict(precision=precision, lr=lr, wd=wd, torch_sgd=torch_sgd, seed=seed,
               at={s: round(losses[s - 1], 4) for s in (1, 2, 3, 5, 10, 20, 40, 80, 120, 140)},
               skipped=sum(skipped), s=round(time.time() - t0, 1))
    print(json.dumps(row), flush=True)
