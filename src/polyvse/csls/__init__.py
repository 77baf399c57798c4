"""Cross-domain similarity local scaling (CSLS), the hubness-corrected score, in one package:

    scoring      the definition, once for numpy and torch: 2 cos - r_C - r_I, the neighbour means, which bank
    banks        HubnessBanks: a checkpoint's banks as torch tensors (training, evaluation, polyvse.load)
    search       SearchHubness: the same banks in numpy, re-ranking the torch-free search path
    penalties    each indexed photo's r_C, stored with the index of a CSLS checkpoint
    vocabulary   CSLS and nearest-neighbour retrieval between two vocabularies (word translation, as MUSE)

Imported on first use, so the numpy modules load without torch."""

from ..util.lazy import lazy_attributes

__all__ = ["HubnessBanks", "SearchHubness", "csls", "csls_retrieve", "csls_scores"]

__getattr__ = lazy_attributes(
    __name__,
    {
        "HubnessBanks": ".banks",
        "SearchHubness": ".search",
        "csls": ".scoring",
        "csls_retrieve": ".vocabulary",
        "csls_scores": ".vocabulary",
    },
)
