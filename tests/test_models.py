import torch

from polyvse.modules import GruTextEncoder, JointEmbeddingModel, LinearImageHead, ModelConfig


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


def test_order_models_embed_on_the_unit_sphere_so_scores_do_not_tie_at_zero():
    """Without normalisation a caption that shrinks below every image scores exactly 0 with all of them
    (the degenerate solution the hinge loss finds); unit vectors in the positive orthant are ordered only
    when they are equal, so the gold caption's 0 is unique."""
    torch.manual_seed(0)
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=10, image_dim=7, embed_dim=5, word_dim=4, hidden_dim=6, similarity="order")
    )
    img = model.encode_image_features(torch.randn(4, 7))
    txt = model.encode_text_ids(torch.tensor([[1, 2], [3, 0]]), torch.tensor([2, 1]))
    torch.testing.assert_close(img.norm(dim=-1), torch.ones(4))
    torch.testing.assert_close(txt.norm(dim=-1), torch.ones(2))
    assert torch.allclose(model.text_features(torch.tensor([[1, 2]]), torch.tensor([2]))[0], txt[:1])
    s = model.scores(img, txt)
    assert (s < 0).all()  # distinct unit vectors: never the tied maximum 0
    # a shrunken caption would tie at 0 with every image; normalisation makes it the same direction as before
    small = txt[:1] * 1e-3
    assert torch.allclose(model.scores(img, model._joint(small)), s[:, :1], atol=1e-5)
    cosine = JointEmbeddingModel(ModelConfig(vocab_size=10, image_dim=7, embed_dim=5, word_dim=4, hidden_dim=6))
    assert not torch.allclose(cosine.encode_image_features(torch.randn(4, 7)).norm(dim=-1), torch.ones(4))
