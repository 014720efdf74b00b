"""The accumulation rule, checked in a system's source: a step adds into the next state (advance) and into scratch
(accumulate), never stores. A plain store into x[t+1] gives the same rollout and a silently wrong adjoint
(docs/taichi_pitfalls.md#plain-stores), which only the source shows before any gradient is taken; the two allowed
stores (assign, set_next) go through accessors. tisim.testing.check_system reports what ``plain_stores`` finds."""
import ast
import inspect
import textwrap


class PlainStores(ast.NodeVisitor):
    """Plain stores (=, not +=) into the next state x[..., t + 1, ...] or into scratch w[...] in @ti.func bodies, the
    arrays named as such or reached through the step context (s.x, s.w).

    A plain store into x[t+1] gives the same rollout and a silently wrong adjoint: Taichi's reverse mode of a store
    overwrites the derivative the backward pass has already left there. Steps add (advance, accumulate); the two
    allowed stores (assign, set_next) go through accessors."""

    def __init__(self):
        self.found = []
        self.taichi = False

    def visit_FunctionDef(self, node):
        outer = self.taichi
        self.taichi = outer or any(ast.unparse(d) == "ti.func" for d in node.decorator_list)
        self.generic_visit(node)
        self.taichi = outer

    def visit_Assign(self, node):
        if not self.taichi:
            return
        for target in node.targets:
            if not isinstance(target, ast.Subscript):
                continue
            # the array: x or w, or the step context's s.x or s.w
            array = target.value.id if isinstance(target.value, ast.Name) else \
                target.value.attr if isinstance(target.value, ast.Attribute) else None
            if (array == "x" and "t + 1" in ast.unparse(target)) or array == "w":
                self.found.append(f"line {node.lineno}: {ast.unparse(node)}")
        self.generic_visit(node)


def sources_of(cls):
    """[(label, parsed source or None)] to scan for a class: its module's functions and the bodies of the classes of
    its MRO defined there, for every module of its MRO beyond the engine's (mixins included), from the module's
    file; where a module has no file (code run from a string), the class's own source, or its functions'."""
    mine = [klass for klass in cls.__mro__
            if klass is not object and klass.__module__.split(".")[:2] != ["tisim", "core"]]
    out, done = [], set()
    for klass in mine:
        try:
            module = inspect.getmodule(klass)
            if module.__name__ in done:
                continue
            tree = ast.parse(inspect.getsource(module))
            names = {k.__name__ for k in mine if k.__module__ == module.__name__}
            body = [node for node in tree.body if not isinstance(node, ast.ClassDef) or node.name in names]
            out.append((module.__name__, ast.Module(body=body, type_ignores=[])))
            done.add(module.__name__)
            continue
        except (TypeError, OSError, AttributeError):
            pass
        try:
            out.append((klass.__name__, ast.parse(textwrap.dedent(inspect.getsource(klass)))))
            continue
        except (TypeError, OSError, SyntaxError):
            pass
        functions = []
        for value in vars(klass).values():
            function = getattr(value, "__func__", value)  # staticmethod, classmethod
            if inspect.isfunction(function):
                try:
                    functions.append(textwrap.dedent(inspect.getsource(function)))
                except (TypeError, OSError):
                    pass
        out.append((klass.__name__, ast.parse("\n".join(functions)) if functions else None))
    return out


def plain_stores(cls):
    """Where a system class, its bases and their modules store plainly into the next state or scratch: one line
    each, labelled by module or class."""
    problems = []
    for label, tree in sources_of(cls):
        if tree is None:
            problems.append(f"{label}: no source found to check")
            continue
        visitor = PlainStores()
        visitor.visit(tree)
        problems += [f"{label} {found}" for found in visitor.found]
    return problems
