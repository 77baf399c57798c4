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
"""
from .adapt import METHODS, AdaptRequest, adapt_language
from .adapted_checkpoint import adapted_languages, trained_languages
from .parallel_file import ParallelFileError, read_parallel_file, write_parallel_file
from .teacher import TeacherSettings
from .zero_shot import ZERO_SHOT_DEFAULT, ZERO_SHOT_OFF

__all__ = ["METHODS", "AdaptRequest", "ParallelFileError", "TeacherSettings", "ZERO_SHOT_DEFAULT", "ZERO_SHOT_OFF",
           "adapt_language", "adapted_languages", "read_parallel_file", "trained_languages", "write_parallel_file"]
