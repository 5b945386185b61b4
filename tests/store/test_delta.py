"""store.delta: diff then apply gives back the new tree, and patches are sized by the change."""

from __future__ import annotations

import copy
import json
import random

import pytest

from store import delta


def random_tree(rng: random.Random, depth: int = 0):  # noqa: ANN201
    kind = rng.choice(["dict", "list", "str", "int", "float", "bool", "none"] if depth < 4 else ["str", "int"])
    if kind == "dict":
        return {rng.choice(["a", "b", "c/d", "e~f", "", "g"]) + str(rng.randint(0, 3)): random_tree(rng, depth + 1)
                for _ in range(rng.randint(0, 4))}
    if kind == "list":
        return [random_tree(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {"str": lambda: rng.choice(["x", "y", "long text " * 3]), "int": lambda: rng.randint(-5, 5),
            "float": lambda: rng.random(), "bool": lambda: rng.random() < 0.5, "none": lambda: None}[kind]()


def mutate(rng: random.Random, tree):  # noqa: ANN001, ANN201
    tree = copy.deepcopy(tree)
    if isinstance(tree, dict) and tree and rng.random() < 0.7:
        key = rng.choice(list(tree))
        action = rng.random()
        if action < 0.3:
            del tree[key]
        elif action < 0.6:
            tree[key] = mutate(rng, tree[key])
        else:
            tree[key + "n"] = random_tree(rng, 2)
        return tree
    if isinstance(tree, list) and tree and rng.random() < 0.7:
        action = rng.random()
        if action < 0.3:
            tree.append(random_tree(rng, 2))
        elif action < 0.6:
            i = rng.randrange(len(tree))
            tree[i] = mutate(rng, tree[i])
        else:
            tree.pop()
        return tree
    return random_tree(rng, 1)


@pytest.mark.parametrize("seed", range(300))
def test_diff_then_apply_roundtrips(seed: int) -> None:
    rng = random.Random(seed)
    old = random_tree(rng)
    new = mutate(rng, old)
    ops = delta.diff(old, new)
    # patches survive a trip through JSON (that is how they are stored)
    ops = json.loads(json.dumps(ops))
    assert delta.apply(copy.deepcopy(old), ops) == new
    if json.dumps(old, sort_keys=True) == json.dumps(new, sort_keys=True):
        assert ops == []


def test_append_is_one_small_add() -> None:
    old = {"items": ["x" * 1000] * 200, "n": 1}
    new = {"items": old["items"] + ["y" * 1000], "n": 2}
    ops = delta.diff(old, new)
    assert ops == [{"op": "add", "path": "/items/-", "value": "y" * 1000}, {"op": "replace", "path": "/n", "value": 2}]


def test_keys_with_slash_and_tilde_are_escaped() -> None:
    ops = delta.diff({}, {"a/b": 1, "c~d": 2})
    assert {op["path"] for op in ops} == {"/a~1b", "/c~0d"}
    assert delta.apply({}, ops) == {"a/b": 1, "c~d": 2}


def test_apply_rejects_bad_paths() -> None:
    with pytest.raises(ValueError):
        delta.apply({"a": 1}, [{"op": "replace", "path": "/missing/x", "value": 1}])
    with pytest.raises(ValueError):
        delta.apply({"a": 1}, [{"op": "move", "path": "/a"}])


def test_apply_copies_values_unless_told_not_to() -> None:
    value = {"deep": [1]}
    doc = delta.apply({}, [{"op": "add", "path": "/v", "value": value}])
    doc["v"]["deep"].append(2)
    assert value == {"deep": [1]}
