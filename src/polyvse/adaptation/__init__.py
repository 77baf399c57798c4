"""Teaching a trained frozen-tower model a new language after training, from sentence pairs alone (no photos), and
serving languages it has no part for zero-shot. One concept per module:

    parallel_file       the input: new-language sentences with their counterparts (TSV or JSONL), bad lines named
    line_vectors        the frozen towers' vectors of those lines, through the sentence cache
    zero_shot           the fallback part of a language without one ("mean" of the trained parts, or one of them)
    teacher             teacher learning of the new part (InfoNCE onto the model's own counterpart embeddings)
    tower_map           the cheap alternative: Procrustes / RCSLS map onto the pivot's tower vectors + its part
    adapted_checkpoint  the checkpoint plus one part, recorded in ``adapted_languages``
    adapt               the whole run (`polyvse adapt`): resumable, held-out pairs to choose on
    multiscript_lines   parallel files from the Multi30K extension (MultiScript30k), evaluation photos excluded
    plan                a plan of languages taught one after another into one checkpoint (`polyvse model build`)
"""

from ..util.lazy import lazy_attributes
from .options import METHODS, ZERO_SHOT_DEFAULT, ZERO_SHOT_OFF, TeacherSettings

# the rest imports torch: only on first use (`polyvse` builds every command's parser, `adapt`'s too)
__getattr__ = lazy_attributes(
    __name__,
    {
        "AdaptRequest": ".adapt",
        "adapt_language": ".adapt",
        "adapted_languages": ".adapted_checkpoint",
        "trained_languages": ".adapted_checkpoint",
        "ParallelFileError": ".parallel_file",
        "read_parallel_file": ".parallel_file",
        "write_parallel_file": ".parallel_file",
    },
)

__all__ = [
    "METHODS",
    "AdaptRequest",
    "ParallelFileError",
    "TeacherSettings",
    "ZERO_SHOT_DEFAULT",
    "ZERO_SHOT_OFF",
    "adapt_language",
    "adapted_languages",
    "read_parallel_file",
    "trained_languages",
    "write_parallel_file",
]
