import torch

from polyvse.models import GruTextEncoder, JointEmbeddingModel, LinearImageHead, ModelConfig


def test_text_encoder_ignores_padding():
    torch.manual_seed(0)
    enc = GruTextEncoder(vocab_size=20, word_dim=8, hidden_dim=16, embed_dim=12).eval()
    ids = torch.tensor([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    lengths = torch.tensor([3, 2])
    out = enc(ids, lengths)
    assert out.shape == (2, 12)
    alone = enc(torch.tensor([[3, 4, 5]]), torch.tensor([3]))
    assert torch.allclose(out[0], alone[0], atol=1e-6)


def test_bidirectional_and_image_head_shapes():
    enc = GruTextEncoder(vocab_size=10, word_dim=4, hidden_dim=6, embed_dim=5, bidirectional=True)
    assert enc(torch.tensor([[1, 2]]), torch.tensor([2])).shape == (1, 5)
    assert LinearImageHead(7, 5)(torch.randn(3, 7)).shape == (3, 5)


def test_joint_model_scores_are_cosines():
    model = JointEmbeddingModel(ModelConfig(vocab_size=10, image_dim=7, embed_dim=5, word_dim=4, hidden_dim=6))
    img = model.encode_image_features(torch.randn(3, 7))
    txt = model.encode_text_ids(torch.tensor([[1, 2], [3, 0]]), torch.tensor([2, 1]))
    s = model.scores(img, txt)
    assert s.shape == (3, 2)
    assert (s.abs() <= 1 + 1e-6).all()
    # gradients reach both branches
    s.sum().backward()
    assert model.image_head.fc.weight.grad.abs().sum() > 0
    assert model.text_encoder.embed.weight.grad.abs().sum() > 0
