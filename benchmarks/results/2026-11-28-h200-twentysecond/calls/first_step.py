"""What cuDNN's benchmark mode costs a first step: torchvision resnet50, fp16 autocast, channels_last, batch
512, fused SGD, eager; the seconds of each of the first steps, synchronized. Usage: first_step.py on|off."""
import sys
import time

import torch
import torchvision

torch.backends.cudnn.benchmark = sys.argv[1] == "on"
t0 = time.perf_counter()
net = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, fused=True)
scaler = torch.amp.GradScaler()
x = torch.randn(512, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (512,), device="cuda")
torch.cuda.synchronize()
times = []
for _ in range(5):
    s = time.perf_counter()
    with torch.autocast("cuda", torch.float16):
        loss = torch.nn.functional.cross_entropy(net(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - s)
print(f"cudnn.benchmark={sys.argv[1]}: setup {s - t0 - sum(times[:-1]):.2f} s; steps (s): "
      + " ".join(f"{t:.3f}" for t in times), flush=True)
