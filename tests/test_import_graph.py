"""No import cycles among the modules of src/, nor among its packages: every import (module level or inside a
function) is an edge from the importing module to the module it names, and neither graph may have a cycle. A
package here is a first-level part of a layer (``polyvse.model``, ``polyvse.index``; a top-level module such as
``polyvse.languages`` is one of its own)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def modules() -> dict[str, tuple[Path, bool]]:
    """{dotted name: (file, is a package __init__)} for every module under src/."""
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = modules()

    def resolve(name: str) -> str | None:  # the longest prefix of ``name`` that is one of our modules
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in mods.items():
        package = name if is_package else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                for alias in node.names:  # `from pkg import submodule` depends on the submodule itself
                    sub = resolve(f"{base}.{alias.name}")
                    deps.add(sub if sub and sub.startswith(base + ".") else resolve(base))
        graph[name] = {d for d in deps if d and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_src_has_no_import_cycle():
    graph = import_graph()
    assert (
        "polyvse_train.sampling.slots" in graph["polyvse_train.sampling.photo_tuples"]
    )  # the walk sees relative imports
    assert cycles(graph) == []


def package_of(module: str) -> str:
    """``polyvse.index.search`` -> ``polyvse.index``; ``polyvse.languages`` -> itself; a layer's __init__ -> itself."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto packages (imports inside a package dropped)."""
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        out.setdefault(package_of(mod), set()).update(package_of(d) for d in deps if package_of(d) != package_of(mod))
    return out


def test_the_package_checker_sees_a_cycle_through_imports_inside_functions():
    # what index <-> text_query <-> tower_query was: each edge an import inside a function
    graph = {
        "polyvse.index.search": {"polyvse.tower_query"},
        "polyvse.tower_query": {"polyvse.text_query"},
        "polyvse.text_query": {"polyvse.index.hubness"},
        "polyvse.index.hubness": set(),
    }
    assert cycles(package_graph(graph)) == [["polyvse.index", "polyvse.text_query", "polyvse.tower_query"]]


def test_src_has_no_package_cycle():
    """Counting the imports inside functions, which the module-level cycle check above sees too: no package of
    src/ reaches back to itself through another (adaptation <-> model, index <-> model were such cycles)."""
    assert cycles(package_graph(import_graph())) == []


def test_the_library_has_few_top_level_modules():
    """polyvse/'s top level holds its packages and at most ten modules: helpers live in polyvse.util, the model in
    polyvse.model, a method's code with its kind (polyvse.alignment.rerank)."""
    top = sorted(p.name for p in (SRC / "polyvse").glob("*.py"))
    assert len(top) <= 10, top


RANK = {
    "polyvse": 0,
    "polyvse_train": 1,
    "polyvse_app": 2,
    "polyvse_tooling": 3,
}  # library <- trainer <- app <- tooling


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every edge from a module to a layer above its own, as "module -> dependency"."""
    return [
        f"{mod} -> {dep}"
        for mod, deps in sorted(graph.items())
        for dep in sorted(deps)
        if RANK[dep.split(".")[0]] > RANK[mod.split(".")[0]]
    ]


def test_the_layer_checker_finds_an_upward_import():
    # what polyvse_train/cli.py was: the trainer forwarding to the application's command line
    assert upward_imports({"polyvse_train.cli": {"polyvse_app.cli", "polyvse.errors"}}) == [
        "polyvse_train.cli -> polyvse_app.cli"
    ]
    assert upward_imports({"polyvse.modules.text_query": {"polyvse_train.config"}}) == [
        "polyvse.modules.text_query -> polyvse_train.config"
    ]


def test_layers_import_downwards_only():
    """polyvse (library) <- polyvse_train (trainer) <- polyvse_app (command line + HTTP service): no module
    imports a layer above its own, without exceptions."""
    assert upward_imports(import_graph()) == []


#: the application's modules that may import the trainer: the commands that train (a run, the demo, the zoo, the
#: product model's build) and the report, which renders the zoo's page
TRAINING_COMMANDS = frozenset(
    {
        "polyvse_app.commands.train",
        "polyvse_app.commands.demo",
        "polyvse_app.commands.zoo",
        "polyvse_app.commands.model",
        "polyvse_app.commands.report",
    }
)


def trainer_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every edge from the application to the trainer outside the training commands, as "module -> dependency"."""
    return [
        f"{mod} -> {dep}"
        for mod, deps in sorted(graph.items())
        for dep in sorted(deps)
        if mod.split(".")[0] == "polyvse_app" and dep.split(".")[0] == "polyvse_train" and mod not in TRAINING_COMMANDS
    ]


def test_the_trainer_checker_finds_an_application_module_that_reaches_into_the_trainer():
    # what polyvse_app/shard_role.py was: the process group taken from the trainer
    assert trainer_imports(
        {
            "polyvse_app.shard_role": {"polyvse_train.distributed", "polyvse.sharding"},
            "polyvse_app.commands.train": {"polyvse_train.train"},
        }
    ) == ["polyvse_app.shard_role -> polyvse_train.distributed"]


def test_only_the_training_commands_import_the_trainer():
    """Searching, serving, evaluating, extracting features and adapting a model work without the trainer: the
    process group, split resolution, the sentence cache and the evaluation tasks are the library's."""
    graph = import_graph()
    assert trainer_imports(graph) == []
    assert TRAINING_COMMANDS <= set(graph)  # the whitelist names modules that exist


def test_the_application_runs_as_a_module():
    """`python -m polyvse_app` is the command line (torchrun starts modules: README's torchrun lines)."""
    out = subprocess.run(
        [sys.executable, "-m", "polyvse_app", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: polyvse ") and "train" in out.stdout and "serve" in out.stdout


def recipe_files(name: str) -> list[str]:
    """The files docs/architecture.md's recipe ``name`` ("An objective") names, in order, once each."""
    import re

    text = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    recipe = re.search(rf"\*\*{name}\*\*(.*?)(?:\n\n|\Z)", text, re.S).group(1)
    return list(dict.fromkeys(re.findall(r"`((?:src|configs)/[\w/.]+?\.(?:py|yaml))`", recipe)))


def test_the_recipes_name_files_that_exist_and_an_objective_touches_three():
    """docs/architecture.md's recipes name every file a newcomer touches: each exists (``NEW`` is the newcomer's
    own), and an objective is three files."""
    for name in ("An objective", "A reader", "An endpoint", "A backbone", "A language"):
        for path in recipe_files(name):
            if "NEW" not in path:
                assert (SRC.parent / path).is_file(), f"{name}: {path}"
    objective = [
        p for p in recipe_files("An objective") if p != "configs/overlays/smoke.yaml"
    ]  # only if it has a stage
    assert len(objective) <= 3, objective


def test_the_tooling_imports_what_it_says():
    """polyvse_tooling (the scripts', benchmarks' and tests' harness) imports of polyvse only polyvse.provenance, as
    its docstring says, and no package of src/ imports it."""
    graph = import_graph()
    tooling = {mod for mod in graph if mod.startswith("polyvse_tooling")}
    assert tooling and {d for mod in tooling for d in graph[mod] if not d.startswith("polyvse_tooling")} == {
        "polyvse.provenance"
    }
    assert not [mod for mod, deps in graph.items() if mod not in tooling and deps & tooling]
