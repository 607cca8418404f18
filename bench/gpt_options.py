"""The benchmark GPT's command-line options, shared by the PyTorch peers
(pytorch_gpt.py, pytorch_elastic.py) without importing torch."""


def add_model_options(ap, **defaults):
    """Adds the model, batch and training options; `defaults` overrides by name
    (seq_len=64, ...)."""
    d = dict(vocab=256, seq_len=128, d_model=256, heads=8, layers=4, dropout=0.1,
             micro_batch=4, global_batch=32, steps=10, lr=3e-3, warmup=5, threads=1,
             seed=1)
    d.update(defaults)
    for name, value in d.items():
        ap.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
