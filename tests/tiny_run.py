"""The smallest training run the tests share: the toy data set, tiny encoders, one epoch (seconds)."""

TINY = dict(
    data="toy",
    data_scale="smoke",
    embed_dim=16,
    word_dim=8,
    text_hidden=16,
    epochs=1,
    batch_size=32,
    lr=2e-3,
    lr_decay_epoch=1,
    vocab_min_count=1,
    grad_diag_every=0,
)
