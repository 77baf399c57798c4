"""The numpy serving mirrors of the torch text branches: a text query of a checkpoint answered without importing
torch, with the torch model's arithmetic (tests compare the vectors with ``polyvse.load``'s).

    text_query   TextQueryModel: word-level text branches (NumpyQueryModel: the numpy base)
    tower_query  TowerQueryModel: frozen-tower text branches (a trained e5 tail too)
    e5           e5's trained tail in numpy (torch: polyvse.modules.pretrained.e5.tail)

CSLS re-ranking in numpy is polyvse.csls.search."""
