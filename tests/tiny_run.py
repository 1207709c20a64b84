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


def tiny(drop: tuple[str, ...] = (), **over) -> dict:
    """:data:`TINY` with the fields ``over`` changed and the fields ``drop`` left at the Config's defaults."""
    return {**{k: v for k, v in TINY.items() if k not in drop}, **over}
