"""Retrieval evaluation: binary recall, coherence, semantic and human-relevance metrics."""
from .retrieval import (fold_averaged_retrieval_metrics, i2t_ranks, recall_from_ranks, retrieval_metrics,
                        t2i_ranks)

__all__ = ["fold_averaged_retrieval_metrics", "i2t_ranks", "recall_from_ranks", "retrieval_metrics", "t2i_ranks"]
