"""The trained model's recipe hash and cache (the training itself runs in serving-cpu)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serving import trained_model as tm


def test_recipe_hash_is_stable_and_changes_with_the_recipe() -> None:
    assert tm.recipe_hash() == tm.recipe_hash(dict(tm.RECIPE))
    assert tm.recipe_hash({**tm.RECIPE, "steps": tm.RECIPE["steps"] + 1}) != tm.recipe_hash()
    assert len(tm.recipe_hash()) == 16


def test_a_cached_model_is_reused_without_training(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(tm.CACHE_ENV, str(tmp_path))
    done = tmp_path / f"{tm.SCORING_MODEL_NAME}-{tm.recipe_hash()}"
    done.mkdir()
    (done / "trained_model.json").write_text(json.dumps({"recipe": tm.RECIPE}))

    def no_training(*a, **k):
        raise AssertionError("trained again")

    monkeypatch.setattr(tm, "train", no_training)
    assert tm.ensure_trained_model() == done


def test_an_unfinished_model_is_trained_again_and_replaced_atomically(tmp_path: Path,
                                                                      monkeypatch) -> None:
    half = tmp_path / f"{tm.SCORING_MODEL_NAME}-{tm.recipe_hash()}"
    half.mkdir()
    (half / "model.safetensors").write_text("half")  # no trained_model.json: a crash mid-write
    calls: list[Path] = []

    def fake_train(out: Path, recipe, *, log=None):
        calls.append(out)
        (out / "trained_model.json").write_text("{}")

    monkeypatch.setattr(tm, "train", fake_train)
    assert tm.ensure_trained_model(root=tmp_path) == half
    assert len(calls) == 1 and calls[0] != half and not calls[0].exists()
    assert sorted(p.name for p in half.iterdir()) == ["trained_model.json"]
    with pytest.raises(ValueError, match="twin kind"):
        tm.write_twin(half, tmp_path / "t", "int4")


def test_prompt_is_the_eval_prompt() -> None:
    from serving.evals import build_prompt

    assert tm.prompt_of("What is 2 + 2?") == build_prompt([], "What is 2 + 2?")
