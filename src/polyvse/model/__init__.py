"""The model: a checkpoint folder and what serves it.

checkpoint       the folder: config.json + weights (+ CSLS banks, adapted parts), read and written
parts            which language reads through which per-language part (trained, adapted, zero-shot)
zero_shot        the fallback part of a language without one; subwords, subword_student: an adapted part
                 that also reads the sentence's subwords
embedding_model  EmbeddingModel, the interface every model implements
torch_model      PolyvseModel: torch, text and photos
numpy_serving    the numpy mirrors of the torch text branches: TextQueryModel (word-level), TowerQueryModel
                 (frozen towers, a trained e5 tail too)
loading          load (PolyvseModel) and query_model (the numpy text model where one covers the checkpoint)
"""
