# embed, generate and train: the same functions as `rlx embed / generate / train`, so the
# results must equal the program's.
import json
import os

import numpy as np

import rlx
from conftest import run_rlx

TEXTS = ["A compiler for tensors.", "Sentence embeddings on the CPU.", "rlx"]


def test_embed_equals_the_program(minilm, tmp_path):
    e = rlx.embed(minilm, TEXTS)
    assert e.shape == (3, 384) and e.dtype == np.float32
    assert np.all(np.isfinite(e)) and not np.allclose(e[0], e[1])
    out = str(tmp_path / "e.npy")
    code, _, err = run_rlx("embed", minilm, *TEXTS, "--out", out, "--quiet")
    assert code == 0, err
    np.testing.assert_array_equal(e, np.load(out))
    # batch size does not change the result
    np.testing.assert_allclose(rlx.embed(minilm, TEXTS, batch=1), e, rtol=1e-5, atol=1e-6)


def test_generate_equals_the_program(qwen3, tmp_path):
    pieces = []
    r = rlx.generate(qwen3, "Hello there", n=6, stream=pieces.append)
    assert len(r.tokens) == 1 and 1 <= len(r.tokens[0]) <= 6
    assert isinstance(r.text, str)
    assert b"".join(pieces).startswith(b"Hello there")
    js = str(tmp_path / "g.json")
    code, _, err = run_rlx("generate", qwen3, "--prompt", "Hello there", "-n", "6", "--json", js, "--quiet")
    assert code == 0, err
    with open(js) as f:
        j = json.load(f)
    assert j["tokens"] == r.tokens and j["prompt_tokens"] == r.prompt_tokens
    # token-id prompts, two at once, sampled with a seed: reproducible
    a = rlx.generate(qwen3, [[1, 2, 3], [4, 5]], n=4, temp=0.8, top_k=20, seed=9)
    b = rlx.generate(qwen3, [[1, 2, 3], [4, 5]], n=4, temp=0.8, top_k=20, seed=9)
    assert a.tokens == b.tokens and len(a.tokens) == 2


def test_train_synthetic_mnist(tmp_path):
    save = str(tmp_path / "mlp.safetensors")
    r = rlx.train("mnist", arch="mlp", synthetic=True, train_size=512, test_size=256, batch=64, epochs=2, lr=0.1,
                  seed=3, save=save)
    assert len(r.records) == 2
    assert r.records[1]["loss"] < r.records[0]["loss"]
    assert r.test_accuracy > 0.3  # well above chance (0.1) after two small epochs
    assert set(r.parameters) >= {"fc1.weight", "fc2.weight"}
    assert os.path.exists(save)
    st = rlx.load(save)
    np.testing.assert_array_equal(st.weights["fc1.weight"], r.parameters["fc1.weight"])


def test_load_model_folders(minilm, qwen3):
    bert = rlx.load(minilm)
    assert "BERT" in bert.format
    assert len(bert.inputs) == 3 and bert.metadata["hidden_size"] == "384"
    report = rlx.explain(bert, "cpu", dims={"batch": 2, "seq": 8})
    assert report.ok and len(report.nodes) > 10
    qwen = rlx.load(qwen3)
    assert "qwen3 decoder" in qwen.format and qwen.metadata["num_hidden_layers"] == "2"


def test_gguf_load_and_generate(tmp_path):
    from conftest import made_model
    folder = made_model("qwen3-tiny-2l-q8", "qwen3-tiny", "--layers", "2", "--seed", "5", "--gguf-type", "q8_0")
    gguf = os.path.join(folder, "model-q8_0.gguf")
    m = rlx.load(gguf)
    assert "gguf" in m.format.lower() and len(m.weights) > 0
    r = rlx.generate(gguf, "Hello", n=3)
    code, _, err = run_rlx("generate", gguf, "--prompt", "Hello", "-n", "3", "--json", str(tmp_path / "g.json"),
                           "--quiet")
    assert code == 0, err
    with open(tmp_path / "g.json") as f:
        assert json.load(f)["tokens"] == r.tokens
