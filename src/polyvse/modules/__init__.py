"""The torch modules: text encoders, image heads and the joint embedding model.

Names are imported on first use, so that ``polyvse.modules.config`` loads without torch: the numpy text model
(``polyvse.model.numpy_serving.text_query``) reads it, and a text query from the command line never needs torch.
"""

from ..util.lazy import lazy_attributes

__all__ = ["GruTextEncoder", "LinearImageHead", "MlpImageHead", "JointEmbeddingModel", "ModelConfig", "TextEncoder"]

__getattr__ = lazy_attributes(
    __name__,
    {
        "LinearImageHead": ".image_head",
        "MlpImageHead": ".image_head",
        "GruTextEncoder": ".text_encoder",
        "TextEncoder": ".text_encoder",
        "JointEmbeddingModel": ".joint",
        "ModelConfig": ".config",
    },
)
