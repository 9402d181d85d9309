"""The package's import graph has no cycle (docs/ARCHITECTURE.md, "Module map").

Every module of ``src/openai_latency`` (subpackages included) is parsed, not imported, and every
``import`` statement anywhere in it counts: at the top, inside a function (lazy imports), and under
``if TYPE_CHECKING:``. A cycle through a type-only import is still a cycle in the design (the two
modules cannot be understood, or moved, apart), so it fails too. The modules of the instrumentation
also keep to the layers of docs/ARCHITECTURE.md, the CLI's parts to theirs ("The CLI"), and that
document's references to the code resolve.

``python tests/test_architecture.py`` prints the CLI's facts (also shown by
``pytest tests/test_architecture.py -s``): no cycle, the import arrows between its parts, what bench
and report share, the largest modules.
"""

from __future__ import annotations

import ast
import re
from itertools import pairwise
from pathlib import Path

import pytest

PACKAGE = "openai_latency"
ROOT = Path(__file__).resolve().parent.parent / "src" / PACKAGE

Edges = dict[str, dict[str, int]]
"""module -> {imported module of the package: line of the first such import}."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name ``from <node.module>`` refers to, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]  # a package's own __init__ is its level-1 anchor
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(modules: dict[str, Path] | None = None) -> Edges:
    """The graph of imports between the package's modules (see the module docstring)."""
    modules = _modules() if modules is None else modules
    edges: Edges = {name: {} for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(name, is_package, node)
                # `from . import x`: the submodule x when there is one, else a name of the package
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                    for alias in node.names
                ]
            for target in targets:
                # `import a.b.c` names a module; its parents' __init__ run too, but that is Python's
                # doing, not a dependency this module chose
                if target in modules and target != name:
                    edges[name].setdefault(target, node.lineno)
    return edges


def cycles(edges: Edges) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan), each as the
    path ``a -> b -> ... -> a`` found inside the component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return [_path_within(edges, set(component)) for component in components]


def _path_within(edges: Edges, component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module, by breadth-first search."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges[node]):
                if target not in component:
                    continue
                if target == start:  # back at the start: walk the predecessors from node
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if target not in previous:
                    previous[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover: a component has one


def _component(edges: Edges, start: str) -> set[str]:
    """The modules that both reach ``start`` and are reached from it."""

    def reach(graph: dict[str, set[str]]) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for target in graph[todo.pop()]:
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    forward = {node: set(targets) for node, targets in edges.items()}
    backward: dict[str, set[str]] = {node: set() for node in edges}
    for node, targets in edges.items():
        for target in targets:
            backward[target].add(node)
    return reach(forward) & reach(backward)


def _describe(edges: Edges, modules: dict[str, Path], cycle: list[str]) -> str:
    steps = []
    for source, target in pairwise(cycle):
        path = modules[source].relative_to(ROOT.parent.parent)
        steps.append(f"    {source} -> {target}  ({path}:{edges[source][target]})")
    return "\n".join(steps)


def test_the_package_has_no_import_cycle() -> None:
    modules = _modules()
    edges = import_graph(modules)
    found = cycles(edges)
    report = "\n".join(
        f"import cycle {i}: {' -> '.join(cycle)}\n{_describe(edges, modules, cycle)}\n"
        f"    (all modules on a cycle with these: {', '.join(sorted(_component(edges, cycle[0])))})"
        for i, cycle in enumerate(found, 1)
    )
    assert not found, "\n" + report


def test_the_graph_sees_every_kind_of_import() -> None:
    """The graph is only as good as its parser: relative, absolute, type-only and lazy imports."""
    edges = import_graph()
    assert "openai_latency.hooks.registry" in edges["openai_latency.hooks.sdk_hooks"]  # from .registry import
    assert "openai_latency.call.operation" in edges["openai_latency.hooks.registry"]  # under TYPE_CHECKING
    assert "openai_latency.instrumentor" in edges["openai_latency"]  # lazy, inside __getattr__
    assert "openai_latency.version" in edges["openai_latency.cli"]  # from ..version import
    assert "openai_latency.call.summary" in edges["openai_latency.call.operation"]
    assert "openai_latency.read.attributes" in edges["openai_latency.hooks.sdk_hooks"]  # from ..read import x
    assert "openai_latency.content.capture" in edges["openai_latency.hooks.sdk_hooks"]  # import ... as


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b": 1}, "b": {"c": 1}, "c": {}}, []),
        ({"a": {"b": 1}, "b": {"a": 1}}, [["a", "b", "a"]]),
        ({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}, [["a", "b", "c", "a"]]),
        ({"a": {"b": 1, "c": 1}, "b": {"c": 1}, "c": {"a": 1}}, [["a", "c", "a"]]),
    ],
    ids=["acyclic", "pair", "triangle", "shortest"],
)
def test_cycle_finder(graph: Edges, expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


LAYERS = (
    ("semconv", "config", "_guard", "version", "file_exporter", "clock", "content.bounded_json"),
    ("metrics",),
    ("model",),
    ("read.attributes", "read.headers", "read.errors", "read.routing"),
    ("call.timeline", "hooks.stream_usage", "content.messages", "read.server_timing"),
    ("hooks.arrival_stamps",),
    ("call.token_times", "hooks.reads"),
    ("call.summary", "content.capture", "hooks.http_trace", "call.deferred"),
    ("call.operation", "content.realtime_input"),
    ("hooks.registry", "hooks.streams", "websocket.arrivals"),
    ("websocket.phases",),
    ("hooks.sdk_hooks", "hooks.dns", "websocket.turns", "websocket.handshake"),
    ("hooks.legacy_send", "websocket.responses"),
    ("websocket.realtime", "websocket.agents"),
    ("websocket.hooks",),
    ("instrumentor",),
    # the package's __init__, the wings' (docstrings only)
    ("", "hooks", "call", "content", "read", "websocket"),
)
"""The instrumentation's modules, bottom layer first, as drawn in docs/ARCHITECTURE.md ("Module
map"): a module imports only modules of lower layers (cli/ and fake_server/ stand beside them)."""

CORE_PARTS = (
    ("semconv", "config", "_guard", "version", "file_exporter", "clock"),  # plain modules at the root
    ("metrics",),
    ("model",),
    ("read",),  # SDK objects, headers, failures, kinds, the server's account -> attributes
    ("content",),  # opt-in message content
    ("call",),  # one call as data: timeline, token times, summary, operation, deferred ends
    ("hooks",),  # where the SDK is hooked: wrappers, streams, HTTP trace, DNS, registry
    ("websocket",),  # the WebSocket transports: handshake, turns, arrival stamps, Realtime, Agents SDK
    ("instrumentor",),
    ("",),  # the package's __init__: the public face
)
"""The core's parts (its wings and root modules), bottom layer first, as CLI_LAYERS for cli/: a part
imports only parts of lower layers (docs/ARCHITECTURE.md, "Module map")."""
BENCH_PARTS = (
    ("workload", "lengths"),  # the workload's conversations; length distributions
    ("plan",),  # what a run is, typed
    ("run",),  # the load generator, its loops, sweep, workers, the run's spans, the SDK call
    ("options", "results"),  # command line -> plan (reads replay files, checks --sweep); numbers -> output
    ("command", ""),  # main: options -> run -> results; the package's __init__
)
"""cli/bench/'s parts (its sub-packages and root modules), bottom layer first, as CLI_LAYERS: a part
imports only parts of lower layers (docs/ARCHITECTURE.md, "The CLI")."""
#: The core before its wings: 29 flat modules, 90 import arrows between them (issue 30).
CORE_ARROWS_BEFORE = 90
#: cli/bench/ before issue 30: 24 modules, 64 import arrows between them.
BENCH_ARROWS_BEFORE = 64
OUTSIDE_CORE = (f"{PACKAGE}.cli", f"{PACKAGE}.fake_server")


def _core_part(module: str) -> str:
    """``openai_latency.call.timeline`` -> ``call``; ``openai_latency.clock`` -> ``clock``; the
    package's ``__init__`` -> ``""``."""
    return module[len(PACKAGE) :].lstrip(".").split(".")[0]


def core_arrows(edges: Edges) -> set[tuple[str, str]]:
    """(importing part, imported part) for every import between two parts of the core."""
    core = {name for name in edges if not name.startswith(OUTSIDE_CORE)}
    return {
        (_core_part(source), _core_part(target))
        for source in core
        for target in edges[source]
        if target in core and _core_part(source) != _core_part(target)
    }


def test_every_import_goes_down_a_layer() -> None:
    layer = {f"{PACKAGE}.{name}".rstrip("."): i for i, names in enumerate(LAYERS) for name in names}
    edges = import_graph()
    core = {name for name in edges if not name.startswith(OUTSIDE_CORE)}
    assert core == set(layer), "a module to place in LAYERS (and in the doc's diagram)"
    upward = [
        f"{source} (layer {layer[source]}) imports {target} (layer {layer[target]}), line {line}"
        for source in sorted(core)
        for target, line in edges[source].items()
        if target in layer and layer[target] >= layer[source]
    ]
    assert not upward, "\n".join(upward)


def test_every_core_import_goes_down_a_part() -> None:
    layer = {name: i for i, names in enumerate(CORE_PARTS) for name in names}
    edges = import_graph()
    parts = {_core_part(name) for name in edges if not name.startswith(OUTSIDE_CORE)}
    assert parts == set(layer), f"a part of the core to place in CORE_PARTS: {sorted(parts ^ set(layer))}"
    upward = [
        f"{source or '__init__'} (layer {layer[source]}) imports {target} (layer {layer[target]})"
        for source, target in sorted(core_arrows(edges))
        if layer[target] >= layer[source]
    ]
    assert not upward, "\n".join(upward)


def _bench_part(module: str) -> str:
    """``openai_latency.cli.bench.run.loops`` -> ``run``; ``openai_latency.cli.bench`` -> ``""``."""
    return module[len(f"{PACKAGE}.cli.bench") :].lstrip(".").split(".")[0]


def bench_arrows(edges: Edges) -> set[tuple[str, str]]:
    """(importing part, imported part) for every import between two parts of cli/bench/."""
    bench = f"{PACKAGE}.cli.bench"
    return {
        (_bench_part(source), _bench_part(target))
        for source, targets in edges.items()
        if source == bench or source.startswith(bench + ".")
        for target in targets
        if (target == bench or target.startswith(bench + ".")) and _bench_part(source) != _bench_part(target)
    }


def test_every_bench_import_goes_down_a_part() -> None:
    layer = {name: i for i, names in enumerate(BENCH_PARTS) for name in names}
    edges = import_graph()
    bench = f"{PACKAGE}.cli.bench"
    parts = {_bench_part(name) for name in edges if name == bench or name.startswith(bench + ".")}
    assert parts == set(layer), f"a part of cli/bench/ to place in BENCH_PARTS: {sorted(parts ^ set(layer))}"
    upward = [
        f"bench/{source or '__init__'} (layer {layer[source]}) imports bench/{target} (layer {layer[target]})"
        for source, target in sorted(bench_arrows(edges))
        if layer[target] >= layer[source]
    ]
    assert not upward, "\n".join(upward)


def test_the_public_face_is_the_package_and_its_entry_points() -> None:
    """Users import ``openai_latency.OpenAILatencyInstrumentor`` (README) and the entry points name
    ``openai_latency:OpenAILatencyInstrumentor``, ``openai_latency.file_exporter:FileSpanExporter`` and
    ``openai_latency.cli:main`` (pyproject.toml): each resolves, whatever moved inside the wings."""
    from importlib.metadata import distribution

    import openai_latency

    entry_points = distribution("openai-latency").entry_points  # as installed: what the tools read
    targets = {point.value for point in entry_points}
    assert {
        "openai_latency:OpenAILatencyInstrumentor",
        "openai_latency.file_exporter:FileSpanExporter",
        "openai_latency.cli:main",
    } <= targets
    for point in entry_points:
        assert callable(point.load()), point.value
    from openai_latency.instrumentor import OpenAILatencyInstrumentor

    assert openai_latency.OpenAILatencyInstrumentor is OpenAILatencyInstrumentor
    assert openai_latency.__all__ == ["OpenAILatencyInstrumentor", "__version__"]
    from openai_latency.fake_server import FakeServer  # the tests' and the demo's server

    assert callable(FakeServer)


def _definitions(path: Path) -> set[str]:
    """Qualified names of the classes and functions a module defines (``Class.method``), and the names
    it assigns at the top (constants)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        names.update(target.id for target in targets if isinstance(target, ast.Name))

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(prefix + child.name)
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return names


def test_the_architecture_document_points_at_code_that_exists() -> None:
    """Its ``module.py:Function`` references (the phase table, ``cli/...``, ``tests/...``) and its
    relative links resolve."""
    doc = ROOT.parent.parent / "docs" / "ARCHITECTURE.md"
    text = doc.read_text(encoding="utf-8")
    references = re.findall(r"`([a-z_/]+\.py):([A-Za-z_.]+)`", text)
    assert len(references) > 15
    base = {True: ROOT.parent.parent, False: ROOT}  # tests/... from the repository, the rest from src

    def defined(module: str, name: str) -> bool:
        path = base[module.startswith("tests/")] / module
        return path.exists() and name in _definitions(path)

    missing = [f"{module}:{name}" for module, name in references if not defined(module, name)]
    assert not missing, missing
    links = re.findall(r"\]\((\.\./[^)#]+)\)", text)
    assert [link for link in links if not (doc.parent / link).exists()] == []


def _module_reference(modules: dict[str, Path], token: str) -> tuple[list[str], str] | None:
    """``timeline.clock``, ``run.closed_loop``, ``render.terminal.Progress``: the modules whose dotted
    name ends with the token's longest leading part that names one, and the rest; None when no part
    names a module of the package (an attribute name such as ``gen_ai.request.model``)."""
    parts = token.split(".")
    if parts[0] == PACKAGE or parts[-1] == "py":  # our attribute names; file names
        return None
    for cut in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:cut])
        found = [name for name in modules if name == f"{PACKAGE}.{prefix}" or name.endswith(f".{prefix}")]
        if found:
            return found, ".".join(parts[cut:])
    return None


def test_the_architecture_documents_module_names_exist() -> None:
    """Its ``module.name`` references (``timeline.clock``, ``streams.OBSERVERS``, ``loops.closed_loop``)
    name something that module defines, or a submodule (``render.tables``): a function that moved to
    another module leaves a stale reference, which fails here (``run.closed_loop`` went unnoticed)."""
    modules = _modules()
    text = (ROOT.parent.parent / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    tokens = sorted(set(re.findall(r"`([a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`", text)))
    checked, stale = 0, []
    for token in tokens:
        reference = _module_reference(modules, token)
        if reference is None:
            continue
        candidates, rest = reference
        checked += 1
        if not any(rest in _definitions(modules[name]) or f"{name}.{rest}" in modules for name in candidates):
            stale.append(f"{token} (not in {', '.join(candidates)})")
    assert checked > 30
    assert not stale, stale


CLI = f"{PACKAGE}.cli"
CLI_LAYERS = (
    ("spans",),  # OTLP JSON, Jaeger, our attribute names -> Span, Call
    ("stats",),  # numbers only: percentiles, groups, triage
    ("render",),  # text: durations, tables, triage, waterfall, span tree, terminal
    ("args",),  # the commands' shell: Parser, UsageError, exit statuses, value parsers
    ("report", "bench", "compare", "serve"),  # the commands; never each other
    ("demo",),  # runs bench, draws report's waterfall
    ("",),  # cli/__init__: the command table (commands imported by name, when they run)
)
"""The CLI's parts (sub-packages and top-level modules of ``cli/``), bottom layer first: a part imports
only parts of lower layers, so bench and report never import each other (docs/ARCHITECTURE.md, "The
CLI"). Inside a part, modules import each other freely (without a cycle)."""
#: What bench and report may both import: the domain parts below them and the commands' shell.
SHARED_BY_COMMANDS = {"spans", "stats", "render", "args"}
#: No module longer than this (lines): one concern each, readable in one sitting.
MAX_LINES = 400
#: The CLI before its parts: 26 flat modules, 65 import arrows between them (issue 20).
ARROWS_BEFORE = 65


def _part(module: str) -> str:
    """``openai_latency.cli.bench.run`` -> ``bench``; ``openai_latency.cli`` -> ``""``."""
    return module[len(CLI) :].lstrip(".").split(".")[0]


def cli_arrows(edges: Edges) -> set[tuple[str, str]]:
    """(importing part, imported part) for every import between two parts of the CLI."""
    return {
        (_part(source), _part(target))
        for source, targets in edges.items()
        if source.startswith(CLI)
        for target in targets
        if target.startswith(CLI) and _part(source) != _part(target)
    }


def _imported_parts(edges: Edges, part: str) -> set[str]:
    return {target for source, target in cli_arrows(edges) if source == part}


def test_every_cli_import_goes_down_a_layer() -> None:
    layer = {name: i for i, names in enumerate(CLI_LAYERS) for name in names}
    edges = import_graph()
    parts = {_part(name) for name in edges if name.startswith(CLI)}
    assert parts <= set(layer), f"a part of cli/ to place in CLI_LAYERS: {sorted(parts - set(layer))}"
    upward = [
        f"cli/{source or '__init__'} (layer {layer[source]}) imports cli/{target} (layer {layer[target]})"
        for source, target in sorted(cli_arrows(edges))
        if layer[target] >= layer[source]
    ]
    assert not upward, "\n".join(upward)


def test_bench_and_report_share_only_the_parts_below_them() -> None:
    edges = import_graph()
    bench, report = _imported_parts(edges, "bench"), _imported_parts(edges, "report")
    assert "report" not in bench and "bench" not in report
    assert bench & report <= SHARED_BY_COMMANDS, bench & report


def test_no_module_is_too_long() -> None:
    """Every module of the package: the instrumentation, the CLI and the fake server."""
    long = {name: lines for name, lines in _lines().items() if lines > MAX_LINES}
    assert not long, long


def _lines() -> dict[str, int]:
    return {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in _modules().items()}


def cli_facts() -> list[str]:
    """What a reviewer checks from the imports, as lines."""
    modules = _modules()
    edges = import_graph(modules)
    cli = {name: targets for name, targets in edges.items() if name.startswith(CLI)}
    arrows = cli_arrows(edges)
    module_arrows = sum(1 for targets in cli.values() for target in targets if target.startswith(CLI))
    bench, report = _imported_parts(edges, "bench"), _imported_parts(edges, "report")
    lines = _lines()
    largest = sorted((count, name) for name, count in lines.items() if name.startswith(CLI))[-5:]
    by_part: dict[str, set[str]] = {}
    for source, target in sorted(arrows):
        by_part.setdefault(source or "__init__", set()).add(target)
    return [
        f"import cycles in the package: {len(cycles(edges))}",
        f"cli/: {len(cli)} modules in {len({_part(name) for name in cli})} parts;"
        f" import arrows between its parts: {len(arrows)} (before the parts: {ARROWS_BEFORE} between 26"
        f" flat modules); between its modules: {module_arrows}",
        *(f"  cli/{part} -> {', '.join(sorted(targets))}" for part, targets in by_part.items()),
        f"bench imports {', '.join(sorted(bench))}; report imports {', '.join(sorted(report))};"
        f" they share {', '.join(sorted(bench & report))}; bench -> report: {'report' in bench},"
        f" report -> bench: {'bench' in report}",
        f"longest modules (limit {MAX_LINES} lines): "
        + ", ".join(f"{name.removeprefix(PACKAGE + '.')} {count}" for count, name in reversed(largest)),
        f"longest of the whole package: {max(lines.values())} lines",
        *core_facts(edges),
    ]


def _arrows_within(edges: Edges, prefix: str) -> tuple[int, int]:
    """(modules under ``prefix``, import arrows between them)."""
    inside = {name: targets for name, targets in edges.items() if name.startswith(prefix)}
    return len(inside), sum(
        1 for targets in inside.values() for target in targets if target.startswith(prefix)
    )


def core_facts(edges: Edges) -> list[str]:
    """The core's parts and arrows, and cli/bench/'s inside arrows (issue 30's before and after)."""
    core = {name: targets for name, targets in edges.items() if not name.startswith(OUTSIDE_CORE)}
    module_arrows = sum(1 for targets in core.values() for target in targets if target in core)
    arrows = core_arrows(edges)
    by_part: dict[str, set[str]] = {}
    for source, target in sorted(arrows):
        by_part.setdefault(source or "__init__", set()).add(target)
    bench_modules, bench_module_arrows = _arrows_within(edges, f"{CLI}.bench")
    bench_parts = {_bench_part(name) for name in edges if name.startswith(f"{CLI}.bench")}
    return [
        f"core: {len(core)} modules in {len({_core_part(name) for name in core})} parts; import arrows"
        f" between its parts: {len(arrows)}; between its modules: {module_arrows} (before the wings:"
        f" {CORE_ARROWS_BEFORE} between 29 flat modules)",
        *(f"  {part} -> {', '.join(sorted(targets))}" for part, targets in by_part.items()),
        f"cli/bench/: {bench_modules} modules in {len(bench_parts)} parts; import arrows between its"
        f" parts: {len(bench_arrows(edges))}; between its modules: {bench_module_arrows}"
        f" (before issue 30: {BENCH_ARROWS_BEFORE} between 23 flat modules)",
    ]


def test_cli_facts() -> None:
    """The facts, printed (``-s``), and each one checked."""
    facts = cli_facts()
    print("\n" + "\n".join(facts))
    edges = import_graph()
    assert not cycles(edges)
    assert len(cli_arrows(edges)) <= 25  # "about 20", from 65
    assert max(count for name, count in _lines().items() if name.startswith(CLI)) <= MAX_LINES


if __name__ == "__main__":
    print("\n".join(cli_facts()))
