"""Encoders (VSE++) and caption tokenisation."""

from .text import Vocabulary, tokenize
from .vse import ImageEncoder, TextEncoder, VSEModel

__all__ = ["ImageEncoder", "TextEncoder", "VSEModel", "Vocabulary", "tokenize"]
