"""Photo indexes: a collection of photos embedded by one model, searchable by text or by photo.

    import polyvse
    from polyvse.index import PhotoIndex, Searcher, build_index, add_to_index

    model = polyvse.load("runs/demo/checkpoint")
    build_index(model, photo_paths, "runs/demo/index", cache_dir="~/.cache/polyvse/cache/features")
    searcher = Searcher(model, PhotoIndex.open("runs/demo/index"))
    searcher.text("zwei Hunde spielen im Schnee", "de", k=5).hits

Exact (FAISS flat, inner product over L2-normalised vectors) below ``exact_threshold`` photos, IVF with
nprobe tuned to a recall@10 target above it (HNSW on request), exact scoring with the model's own
similarity for non-cosine models. The manifest records the model's fingerprint: an index refuses queries embedded by
another model. Writes are atomic (generation files + manifest switch). See ``store`` for the layout, and
``shards`` for building one index from several processes or machines.
"""
from .ann import choose_kind
from .build import IndexReport, add_to_index, build_index, embed_photo_files
from .fingerprint import model_fingerprint, similarity_name
from .search import (MAX_QUERY_CHARS, CaptionCollection, CaptionHit, Hit, Searcher, TextResult, check_k,
                     check_query, model_for_index, read_caption_file)
from .shards import IndexShardError, ShardReport, build_index_shard, merge_index_shards
from .store import (DEFAULT_EXACT_THRESHOLD, DEFAULT_RECALL_TARGET, EXACT, EXACT_MODEL, HNSW, IVF, IndexFormatError,
                    IndexMismatchError, PhotoEntry, PhotoIndex, is_index_dir)

__all__ = [
    "DEFAULT_EXACT_THRESHOLD", "DEFAULT_RECALL_TARGET", "EXACT", "EXACT_MODEL", "HNSW", "IVF", "MAX_QUERY_CHARS",
    "CaptionCollection", "CaptionHit", "Hit", "IndexFormatError", "IndexMismatchError", "IndexReport",
    "IndexShardError", "ShardReport", "build_index_shard", "merge_index_shards",
    "PhotoEntry", "PhotoIndex", "Searcher", "TextResult", "add_to_index", "build_index", "check_k",
    "check_query", "choose_kind", "embed_photo_files", "is_index_dir", "model_fingerprint", "model_for_index",
    "read_caption_file", "similarity_name",
]
