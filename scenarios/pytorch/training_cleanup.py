"""Clean-up after training ("How to completely free GPU memory after PyTorch
model training?"): a few steps of a small training loop (a checkpoint's encoder
plus a linear head, AdamW, a DataLoader over random tensors, loss.backward()),
then the seed's clean-up:

    with memrel.phase("unload"): del the step's tensors (logits, loss, batch)
    model, optimizer, loader = memrel.release(model, optimizer, loader)

Under strategy detach-release the release does the seed's third recipe:
p.detach_() and p.grad = None for every parameter, the optimizer's state
cleared, gc.collect(), torch.cuda.empty_cache(). As with accelerate's
release_memory, the caller still holds model, optimizer and loader while the
release runs: the weights and the dataset go back to the allocator at the
assignment, after it; the gradients and AdamW's moments, which detach frees,
go back during it.

Runs on cpu or cuda (memrel's device). The dataset sits on the device, as a
small dataset often does, so the DataLoader holds memory there (--dataset-mib).
"""

import argparse

import _common
from _common import memrel, torch


class Classifier(torch.nn.Module):
    def __init__(self, encoder, classes=2):
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(encoder.config.hidden_size, classes)

    def forward(self, ids):
        return self.head(self.encoder(input_ids=ids).last_hidden_state[:, 0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--dataset-mib", type=int, default=64, help="size of the random token dataset")
    args = ap.parse_args()
    name = memrel.device()
    dev = _common.cuda_device() if name.startswith("cuda") else torch.device(name)
    models = _common.ordered_models()
    rows = max(args.batch * args.steps, args.dataset_mib * 1048576 // (args.seq * 8))

    with memrel.phase("warmup") as p:
        note = _common.warm_up([path for _, path in models])
        if dev.type == "cuda":
            x = torch.randn(64, 64, device=dev)
            (x @ x).sum().item()
            del x
            note = "CUDA context on %s (%s) + one 64x64 matmul; %s" % (dev, torch.cuda.get_device_name(dev), note)
        p.note = note
    memrel.baseline(0.5)

    first = True
    for _ in range(memrel.cycles()):
        for mid, path in models:
            with memrel.phase("load", model=mid) as p:
                encoder = _common.load(path)
                vocab = min(encoder.config.vocab_size, 1000)
                model = Classifier(encoder).to(dev).train()
                del encoder
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
                loader = torch.utils.data.DataLoader(
                    torch.utils.data.TensorDataset(
                        torch.randint(0, vocab, (rows, args.seq), device=dev),
                        torch.randint(0, 2, (rows,), device=dev),
                    ),
                    batch_size=args.batch,
                    shuffle=True,
                )
                p.note = "model + AdamW + DataLoader over %d x %d random tokens on %s (%.1f MiB)" % (
                    rows,
                    args.seq,
                    dev,
                    rows * (args.seq + 1) * 8 / 1048576.0,
                )
                if first:
                    p.note = _common.versions(p.note)
                    first = False
            with memrel.phase("forward", model=mid) as p:
                for step, (x, y) in enumerate(loader):
                    if step == args.steps:
                        break
                    optimizer.zero_grad()
                    logits = model(x)
                    loss = torch.nn.functional.cross_entropy(logits, y)
                    loss.backward()
                    optimizer.step()
                p.note = "training: %d steps of batch %d x %d (forward, loss.backward(), AdamW.step()); last loss %.4f" % (
                    args.steps,
                    args.batch,
                    args.seq,
                    loss.item(),
                )
            with memrel.phase("unload", model=mid):
                del x, y, logits, loss
            model, optimizer, loader = memrel.release(model, optimizer, loader)
            memrel.settle(0.3)


if __name__ == "__main__":
    main()
