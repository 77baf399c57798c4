"""polyvse: multilingual image-text retrieval in one embedding space."""

__version__ = "0.1.0"
