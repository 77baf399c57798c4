"""Photo indexes: a collection of photos embedded by one model, searchable by text or by photo.

    import polyvse
    from polyvse.index import PhotoIndex, Searcher, build_index, add_to_index

    model = polyvse.load("runs/demo/checkpoint")
    build_index(model, photo_paths, "runs/demo/index", cache_dir="~/.cache/polyvse/cache/features")
    searcher = Searcher(model, PhotoIndex.open("runs/demo/index"))
    searcher.text("zwei Hunde spielen im Schnee", "de", k=5).hits

Exact (FAISS flat, inner product over L2-normalised vectors) below ``exact_threshold`` photos, IVF with
nprobe tuned to a recall@10 target above it (HNSW on request), a compressed structure (IVF of 4-bit PQ codes,
re-ranked from the vectors memory-mapped on disk) for a collection that would not fit a memory budget
(``max_memory``; ``compressed``, ``chunked``), exact scoring with the model's own similarity for non-cosine
models. The manifest records the model's fingerprint and its photo side's: an index refuses queries embedded by a
model whose photos land elsewhere (``check_index_accepts``) and serves one that only adds languages. Writes are
atomic (generation files + manifest switch). See ``store`` for the layout, and ``shards`` for building one index
from several processes or machines.

Names are imported on first use: searching needs ``search`` and ``store`` only, not the builders.
"""

from ..util.lazy import lazy_attributes

__all__ = [
    "DEFAULT_EXACT_THRESHOLD",
    "DEFAULT_RECALL_TARGET",
    "EXACT",
    "EXACT_MODEL",
    "HNSW",
    "IVF",
    "IVFPQ",
    "MAX_QUERY_CHARS",
    "CaptionCollection",
    "CaptionHit",
    "Hit",
    "IndexFormatError",
    "IndexMismatchError",
    "IndexReport",
    "IndexShardError",
    "ShardReport",
    "build_index_shard",
    "merge_index_shards",
    "PhotoEntry",
    "PhotoIndex",
    "Searcher",
    "TextResult",
    "add_to_index",
    "build_index",
    "check_index_accepts",
    "check_k",
    "check_query",
    "choose_kind",
    "embed_photo_files",
    "index_accepts",
    "is_index_dir",
    "model_fingerprint",
    "model_for_index",
    "photo_fingerprint",
    "parse_memory",
    "read_caption_file",
    "similarity_name",
    "write_compressed_index",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "choose_kind": ".ann",
        "parse_memory": ".compressed",
        "write_compressed_index": ".chunked",
        **dict.fromkeys(["IndexReport", "add_to_index", "build_index", "embed_photo_files"], ".build"),
        **dict.fromkeys(["model_fingerprint", "photo_fingerprint", "similarity_name"], ".fingerprint"),
        **dict.fromkeys(
            [
                "MAX_QUERY_CHARS",
                "CaptionCollection",
                "CaptionHit",
                "Hit",
                "Searcher",
                "TextResult",
                "check_k",
                "check_query",
                "model_for_index",
                "read_caption_file",
            ],
            ".search",
        ),
        **dict.fromkeys(["IndexShardError", "ShardReport", "build_index_shard", "merge_index_shards"], ".shards"),
        **dict.fromkeys(
            [
                "DEFAULT_EXACT_THRESHOLD",
                "DEFAULT_RECALL_TARGET",
                "EXACT",
                "EXACT_MODEL",
                "HNSW",
                "IVF",
                "IVFPQ",
                "IndexFormatError",
                "IndexMismatchError",
                "PhotoEntry",
                "PhotoIndex",
                "check_index_accepts",
                "index_accepts",
                "is_index_dir",
            ],
            ".store",
        ),
    },
)
