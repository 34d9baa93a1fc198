"""The API reference's docstrings through the site's own syntax (a griffe extension, loaded by mkdocstrings).

The docstrings stay numpydoc and readable in ``help()``: Unicode formulas (``H = -Σ_j π̂_j Σ_z p̂_{j,z} log p̂_{j,z}``),
Sphinx roles (``:func:`~ntpbias.api.train```). At build time, in their prose (never in a code span, an example, a
literal block or a parameter's name and type):

* a role becomes a link to the object where the site documents it (an ``<autoref optional>``: a code span when the
  site does not), its target resolved as Python would from the object the docstring belongs to;
* a formula becomes TeX math (``$H = -\\sum_j \\hat{\\pi}_j ...$``): a run of words holding a formula character
  (a Greek letter, an index ``W_k``, a power ``W^mm``, a star ``d*``, a norm ``||W||``, a relation ``≤``, ...) with the
  symbols, numbers and one-letter names around it; a run whose brackets do not pair stays text;
* what remains is escaped, so an underscore or a star in prose never starts italics;
* parameters whose names start with ``_`` leave the signatures (private arguments, e.g. a cache).

A mention of ``docs/<page>.md`` becomes a link in ``docs/hooks/docs_links.py`` (it needs the page's address).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

try:
    from griffe import Extension
except ImportError:  # the converter's tests run without the docs extra
    Extension = object

#: numpydoc sections whose unindented lines are "name : type" (kept as written); their descriptions are prose
ITEM_SECTIONS = {"parameters", "other parameters", "attributes", "returns", "yields", "receives", "raises", "warns",
                 "warnings", "methods", "see also"}
#: sections kept as written
CODE_SECTIONS = {"examples", "example"}

GREEK = dict(zip("αβγδεζηθικλμνξπρστυφχψωΓΔΘΛΞΠΣΥΦΨΩϵϑϕ",
                 r"\alpha \beta \gamma \delta \varepsilon \zeta \eta \theta \iota \kappa \lambda \mu \nu \xi \pi \rho "
                 r"\sigma \tau \upsilon \varphi \chi \psi \omega \Gamma \Delta \Theta \Lambda \Xi \Pi \sum \Upsilon "
                 r"\Phi \Psi \Omega \epsilon \vartheta \phi".split(), strict=True))
SYMBOLS = {"‖": r"\|", "≤": r"\le ", "≥": r"\ge ", "≈": r"\approx ", "≠": r"\ne ", "·": r"\cdot ", "×": r"\times ",
           "∈": r"\in ", "∉": r"\notin ", "⊥": r"\perp ", "⟂": r"\perp ", "∞": r"\infty ", "→": r"\to ",
           "↦": r"\mapsto ", "⊗": r"\otimes ", "∝": r"\propto ", "∫": r"\int ", "∂": r"\partial ", "∇": r"\nabla ",
           "⟨": r"\langle ", "⟩": r"\rangle ", "∀": r"\forall ", "∃": r"\exists ", "⊂": r"\subset ",
           "⊆": r"\subseteq ", "∪": r"\cup ", "∩": r"\cap ", "~": r"\sim ", "±": r"\pm ", "≅": r"\cong ",
           "∑": r"\sum ", "∏": r"\prod ", "ℝ": r"\mathbb{R}", "−": "-", "…": r"\dots ", "½": r"\tfrac{1}{2}",
           "ᵀ": r"^\top ", "⊤": r"\top ", "°": r"^{\circ}", "%": r"\%", "#": r"\#", "&": r"\&", "∗": "*"}
SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+", strict=True))
SUBSCRIPTS = dict(zip("₀₁₂₃₄₅₆₇₈₉₊₋", "0123456789+-", strict=True))
ACCENTS = {"\u0302": r"\hat", "\u0304": r"\bar", "\u0303": r"\tilde", "\u0307": r"\dot"}
FUNCTIONS = {"log", "exp", "max", "min", "sup", "inf", "lim", "cos", "sin", "tanh", "det", "dim", "rank", "tr", "diag",
             "span", "argmax", "argmin", "softmax", "sign", "ln", "dist", "range", "pos", "sqrt"}
#: the functions TeX has a command for (the others are set with \operatorname)
TEX_FUNCTIONS = {"log", "exp", "max", "min", "sup", "inf", "lim", "cos", "sin", "tanh", "det", "dim", "ln"}
#: characters only a formula uses (with an index, a power, a star or a norm, they make a word a formula)
FORMULA_CHARS = "".join(GREEK) + "".join(c for c in SYMBOLS if c not in "%#&~±×…") + "".join(SUPERSCRIPTS) + \
    "".join(SUBSCRIPTS) + "".join(ACCENTS) + "√°"
#: a relation between two formula words ("d >= m", "V = 2") makes a formula of them
RELATION = re.compile(r"\S\s+(?:=|<=|>=|<|>|->|!=)\s+\S")
FORMULA = re.compile(rf"[{re.escape(FORMULA_CHARS)}]")
STRONG = re.compile(rf"[{re.escape(FORMULA_CHARS)}]|\|\||(?<![A-Za-z])[A-Za-z0-9][_^]|(?<![A-Za-z])[A-Za-z]\*|[)}}]\^|"
                    r"\^[*{(]")
#: words that may stand in a formula beside a formula word: one-letter names (not "a", "A", "I"), numbers, operators,
#: brackets, functions
GLUE = re.compile(r"^(?:[()\[\]{}|,:;=+\-/<>!^_*']|\.\.\.|\d+(?:\.\d+)?(?:e-?\d+)?|"
                  r"(?<![A-Za-z])[B-HJ-Zb-z](?![A-Za-z])|(?:" + "|".join(sorted(FUNCTIONS))
                  + r")(?![A-Za-z]))+[.,;:]*$")
#: a name from the code (``embedding_scale``, ``W_star`` is not one: one letter before the underscore): never math
IDENTIFIER = re.compile(r"(?<![A-Za-z])(?!(?:" + "|".join(sorted(FUNCTIONS)) + r")_)[A-Za-z]{2,}_\w")
PROTECTED = re.compile(r"(``.+?``|`[^`]+`|:(?:py:)?(?:func|class|meth|data|mod|attr|obj|exc|const|ref):`[^`]+`|"
                       r"\$[^$]+\$|https?://\S+|docs/[\w./-]+\.md(?:#[\w-]+)?)")
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|data|mod|attr|obj|exc|const|ref):`(~?)([^`]+)`")


def to_markdown(docstring: str, resolve: Callable[[str], str | None] = lambda name: None) -> str:
    """A numpydoc docstring with its prose through the site's syntax (see the module); ``resolve`` maps a role's
    target to the documented object's full path, or None."""
    lines = docstring.split("\n")
    out: list[str] = []
    section = ""
    verbatim_above = None  # the indentation a literal block (after "::") or a doctest must exceed, while in one
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if verbatim_above is not None:
            if stripped and (indent <= verbatim_above and not stripped.startswith(">>>")):
                verbatim_above = None
            else:
                out.append(line)
                continue
        if stripped and re.fullmatch(r"\s*-{3,}\s*", following):
            section = stripped.lower()
            out.append(line)
            continue
        if re.fullmatch(r"\s*-{3,}\s*", line) or section in CODE_SECTIONS or not stripped:
            out.append(line)
            continue
        if stripped.startswith(">>>"):
            verbatim_above = indent - 1
            out.append(line)
            continue
        if section in ITEM_SECTIONS and indent == 0:  # "name : type": a role in the type as its name
            out.append(ROLE.sub(lambda m: m[2].strip().rsplit(".", 1)[-1] if m[1] else m[2].strip(), line))
            continue
        out.append(line[:indent] + prose(line[indent:], resolve))
        if stripped.endswith("::"):
            verbatim_above = indent
    return "\n".join(out)


def prose(text: str, resolve: Callable[[str], str | None] = lambda name: None) -> str:
    """One line of a docstring's prose: roles to links, formulas to math, the rest escaped; code spans, math, web
    addresses and docs pages as written."""
    text = "".join(_decomposed(ch) for ch in text)
    parts = PROTECTED.split(text)
    out = []
    for k, part in enumerate(parts):
        if k % 2 and ROLE.fullmatch(part):
            out.append(_role(part, resolve))
        elif k % 2 and part.startswith("``") and FORMULA.search(part) and _balanced(part[2:-2]):
            out.append(f"${_tex(part[2:-2].strip())}$")  # a formula set as code: ``T_m = {(h̄_j, π̂_j, p̂_j)}``
        elif k % 2:
            out.append(part)
        else:
            out.append(_formulas(part))
    return "".join(out)


def _decomposed(ch: str) -> str:
    """A letter with a hat or a bar written as one character (``ḡ``) as the letter and the accent."""
    split = unicodedata.normalize("NFD", ch)
    return split if len(split) == 2 and split[1] in ACCENTS else ch


def _role(text: str, resolve: Callable[[str], str | None]) -> str:
    tilde, target = ROLE.fullmatch(text).groups()
    target = target.strip()
    shown = target.rsplit(".", 1)[-1] if tilde else target
    path = resolve(target.lstrip("."))
    code = f"<code>{shown}</code>"
    return f'<autoref identifier="{path}" optional>{code}</autoref>' if path else f"`{shown}`"


def _escape(text: str) -> str:
    return re.sub(r"([\\*_`])", r"\\\1", text)


def _mathlike(word: str) -> bool:
    return not word.isspace() and not IDENTIFIER.search(word) and bool(STRONG.search(word) or GLUE.match(word))


def _formulas(text: str) -> str:
    """Plain text with its formula runs as ``$...$`` math and the rest escaped."""
    words = _words(text)
    out, k = [], 0
    while k < len(words):
        if not _mathlike(words[k]):
            out.append(_escape(words[k]))
            k += 1
            continue
        end, last, depth = k, k, 0
        while end < len(words) and (words[end].isspace() or _mathlike(words[end])):
            if not words[end].isspace():
                last = end
                depth += sum(words[end].count(c) for c in "([{") - sum(words[end].count(c) for c in ")]}")
                if re.search(r"(?<!\.\.)[.;]$", words[end]) or (depth <= 0 and words[end].endswith((",", ":"))):
                    break  # a sentence or a clause ends there ("d = 2048, 500 epochs": the 500 is prose)
            end += 1
        out.append(_run(words[k:last + 1]))
        k = last + 1
    return "".join(out)


def _run(words: list[str]) -> str:
    """A run of formula-like words as math: its longest first part that holds a formula character and whose
    brackets pair, then the rest the same way (``N(0, σ² I_d)`` split at a line end: ``σ²`` and ``I_d``)."""
    if not words:
        return ""
    if words[0].isspace():
        return words[0] + _run(words[1:])
    for end in range(len(words), 0, -1):
        if words[end - 1].isspace():
            continue
        lead, body, trail = _trim("".join(words[:end]))
        if body and (STRONG.search(body) or RELATION.search(body)) and _balanced(body):
            return _escape(lead) + f"${_tex(body)}$" + _escape(trail) + _run(words[end:])
    return _escape(words[0]) + _run(words[1:])


def _words(text: str) -> list[str]:
    """Words and the spaces between them; a space inside braces (``_{j: |x_j| = t}``) does not split a word."""
    words, depth, current = [], 0, ""
    for ch in text:
        if ch.isspace() and depth == 0:
            if current:
                words.append(current)
                current = ""
            if words and words[-1].isspace():
                words[-1] += ch
            else:
                words.append(ch)
            continue
        depth += (ch == "{") - (ch == "}") if depth or ch == "{" else 0
        depth = max(depth, 0)
        current += ch
    if current:
        words.append(current)
    return [piece for word in words for piece in re.split(r"(?<=\S)(?=-[a-z]{3,}[a-z-]*$)", word) if piece]


def _trim(run: str) -> tuple[str, str, str]:
    """A run without what surrounds the formula: a sentence's punctuation, operators left dangling at either end
    (``L^mm =``), and parentheses that enclose the whole run (they stay in the prose)."""
    lead, body, trail = "", run, ""
    changed = True
    while body and changed:
        changed = False
        m = re.search(r"(\s*(?:[.,;:=/]|(?<![_^])\+|<=|>=|->|\s-))+$", body)
        if m and not body.endswith("..."):
            body, trail, changed = body[:m.start()], m.group(0) + trail, True
        m = re.match(r"^(?:(?:[,;:=+/]|<=|>=|->)\s*)+", body)
        if m:
            body, lead, changed = body[m.end():], lead + m.group(0), True
        if body.endswith(")") and body.count(")") > body.count("("):
            body, trail, changed = body[:-1], ")" + trail, True
        if body.startswith("(") and body.count("(") > body.count(")"):
            body, lead, changed = body[1:], lead + "(", True
    return lead, body, trail


def _balanced(text: str) -> bool:
    pairs = {")": "(", "]": "[", "}": "{"}
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack and text.count("||") % 2 == 0 and text.count("‖") % 2 == 0


def _tex(formula: str) -> str:
    """A Unicode formula of a docstring in TeX: Greek letters, accents, indices and powers, norms, relations,
    functions; names of two letters or more upright."""
    out: list[str] = []
    groups: list[bool] = []  # for each open brace: True when it groups an index or a power
    s, i = formula, 0
    norm_open = False
    while i < len(s):
        ch = s[i]
        nxt = s[i + 1] if i + 1 < len(s) else ""
        if nxt in ACCENTS:
            base = GREEK.get(ch, ch)
            out.append(f"{ACCENTS[nxt]}{{{base.strip()}}}")
            i += 2
            continue
        if ch in "_^":
            i += 1
            if s[i:i + 1] == "{":
                out.append(ch + "{")
                groups.append(True)
                i += 1
            elif s[i:i + 1] == "(":
                j = _closing(s, i)
                out.append(f"{ch}{{{_tex(s[i:j + 1])}}}")
                i = j + 1
            elif s[i:i + 1] == "*":
                out.append(f"{ch}*")
                i += 1
            else:
                m = re.match(r"-?[A-Za-z]+|-?\d+|[+\-]|[^\s\w]|\w", s[i:])
                word = m.group(0) if m else ""
                i += len(word)
                if word and not word.isascii():  # a Greek index: W_λ
                    out.append(f"{ch}{{{_tex(word)}}}")
                    continue
                if ch == "^" and word == "T":
                    out.append(r"^\top ")
                elif re.fullmatch(r"[A-Za-z]{2,}", word) and word not in FUNCTIONS:
                    out.append(f"{ch}{{\\mathrm{{{word}}}}}")
                else:
                    out.append(f"{ch}{{{_tex(word) if word and not word.isalnum() else word}}}")
            continue
        if ch == "{":
            out.append(r"\{")
            groups.append(False)
        elif ch == "}":
            out.append("}" if groups and groups.pop() else r"\}")
        elif s.startswith("||", i) or ch == "‖":
            out.append(r"\|")
            i += 2 if ch == "|" else 1
            norm_open = not norm_open
            if not norm_open and s[i:i + 1] == "*":
                out.append("_*")
                i += 1
            continue
        elif ch == "*":
            out.append("^*")
        elif ch == "√" or (s.startswith("sqrt(", i) and not s[i - 1:i].isalpha()):
            j = i + (1 if ch == "√" else 4)
            if s[j:j + 1] == "(":
                k = _closing(s, j)
                out.append(rf"\sqrt{{{_tex(s[j + 1:k])}}}")
            else:
                m = re.match(r"\|[^|]+\||[\w.]+", s[j:])
                k = j + len(m.group(0)) - 1 if m else j - 1
                out.append(rf"\sqrt{{{_tex(s[j:k + 1])}}}")
            i = k + 1
            continue
        elif ch in SUPERSCRIPTS or ch in SUBSCRIPTS:
            table, mark = (SUPERSCRIPTS, "^") if ch in SUPERSCRIPTS else (SUBSCRIPTS, "_")
            j = i
            while j < len(s) and s[j] in table:
                j += 1
            out.append(f"{mark}{{{''.join(table[c] for c in s[i:j])}}}")
            i = j
            continue
        elif s.startswith(("<=", ">=", "!=", "->"), i):
            out.append({"<=": r"\le ", ">=": r"\ge ", "!=": r"\ne ", "->": r"\to "}[s[i:i + 2]])
            i += 2
            continue
        elif ch in GREEK:
            out.append(GREEK[ch] + ("" if not nxt.isalpha() else " "))
        elif ch in SYMBOLS:
            out.append(SYMBOLS[ch])
        elif ch.isalpha():
            m = re.match(r"[A-Za-z]+", s[i:])
            word = m.group(0) if m else ch
            if word == "x" and s[i - 1:i] == " " and s[i + 1:i + 2] == " ":
                out.append(r"\times ")  # "(V x d)": a product of sizes
            elif word == "R" and s[i + 1:i + 2] == "^" and not s[i - 1:i].isalpha():
                out.append(r"\mathbb{R}")  # R^d: the reals
            elif len(word) == 1:
                out.append(word)
            elif word in FUNCTIONS:
                out.append(f"\\{word} " if word in TEX_FUNCTIONS else rf"\operatorname{{{word}}}")
            else:
                out.append(rf"\mathrm{{{word}}}")
            i += len(word)
            continue
        elif ch == "\\":
            out.append(r"\backslash ")
        elif s.startswith("...", i):
            out.append(r"\dots ")
            i += 3
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out).strip()


def _closing(s: str, i: int) -> int:
    """The index of the bracket closing the one at ``i``."""
    depth = 0
    for j in range(i, len(s)):
        depth += (s[j] in "({[") - (s[j] in ")}]")
        if depth == 0:
            return j
    return len(s) - 1


class DocstringsForTheSite(Extension):
    """Rewrites every docstring of the loaded package (see the module) and drops private parameters."""

    def on_package(self, *, pkg, **kwargs) -> None:  # griffe >= 1.0
        self._rewrite(pkg)

    def _rewrite(self, obj, seen=None) -> None:
        seen = set() if seen is None else seen
        if obj.path in seen:
            return
        seen.add(obj.path)
        if getattr(obj, "docstring", None) is not None:
            obj.docstring.value = to_markdown(obj.docstring.value, lambda name: _resolve(obj, name))
        for name in [p.name for p in getattr(obj, "parameters", [])]:
            if name.startswith("_") and not name.startswith("__"):
                del obj.parameters[name]
        for member in list(obj.members.values()):
            if not member.is_alias:
                self._rewrite(member, seen)


def _resolve(obj, name: str) -> str | None:
    """``name`` as Python resolves it from ``obj``: a member of obj, of its parents, of its module's imports, or a
    full path; None when no object of the package has that name."""
    collection = obj.modules_collection
    candidates = [name]
    scope = obj
    while scope is not None:
        candidates.append(f"{scope.path}.{name}")
        if scope.is_module and name.split(".")[0] in scope.members:
            target = scope.members[name.split(".")[0]]
            rest = name.split(".", 1)[1:] if "." in name else []
            try:
                base = target.target_path if target.is_alias else target.path
            except Exception:  # noqa: BLE001 - an alias to something outside the package
                base = None
            if base:
                candidates.append(".".join([base, *rest]))
        scope = scope.parent
    candidates.append(f"ntpbias.{name}")
    for path in candidates:
        try:
            found = collection.get_member(path)
        except Exception:  # noqa: BLE001 - no such object, or an alias to a module outside the package
            continue
        try:
            return found.final_target.path if found.is_alias else found.path
        except Exception:  # noqa: BLE001 - an alias whose target is not loaded
            return path
    return None
