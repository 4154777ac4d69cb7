"""Renders a crate's public API from rustdoc's JSON output as sorted text lines.

Used by scripts/check-public-api. One line per public item: its path, its kind and a
normalised signature (struct fields, enum variants, function signatures, trait impls), so that
adding, removing or changing a public item changes the text. Standard library only.

Usage: public_api.py <rustdoc.json>   (the rendering on stdout)
"""

from __future__ import annotations

import json
import sys

# rustdoc's JSON changes shape between format versions; this renderer reads these.
KNOWN_FORMAT_VERSIONS = {57}


class Renderer:
    def __init__(self, doc: dict):
        self.doc = doc
        self.index = doc["index"]
        self.paths = doc["paths"]
        self.crate = self.index[str(doc["root"])]["name"]
        # Local item id -> every public path it is reachable at.
        self.reach: dict[str, list[str]] = {}
        # Re-exports of items outside this crate: (path, source).
        self.foreign: list[tuple[str, str]] = []
        self.lines: set[str] = set()

    # ---- reachability -------------------------------------------------------------------

    def walk(self) -> None:
        root = str(self.doc["root"])
        stack = [(root, self.crate, 0)]
        seen: set[tuple[str, str]] = set()
        while stack:
            module_id, prefix, depth = stack.pop()
            if (module_id, prefix) in seen or depth > 32:
                continue
            seen.add((module_id, prefix))
            module = self.index.get(module_id)
            if module is None:
                continue
            for child in module["inner"]["module"]["items"]:
                self.reach_item(str(child), prefix, depth, stack)

    def reach_item(self, child: str, prefix: str, depth: int, stack: list) -> None:
        item = self.index.get(child)
        if item is None:
            return
        kind, inner = one(item["inner"])
        if kind == "use":
            target = None if inner["id"] is None else str(inner["id"])
            if inner["is_glob"]:
                if target in self.index and one(self.index[target]["inner"])[0] == "module":
                    stack.append((target, prefix, depth + 1))
                else:
                    self.foreign.append((f"{prefix}::*", inner["source"]))
                return
            path = f"{prefix}::{inner['name']}"
            if target in self.index:
                self.add_reach(target, path)
                if one(self.index[target]["inner"])[0] == "module":
                    stack.append((target, path, depth + 1))
            else:
                source = self.external_path(target) or inner["source"]
                self.foreign.append((path, source))
            return
        if item.get("name") is None:
            return
        path = f"{prefix}::{item['name']}"
        self.add_reach(child, path)
        if kind == "module":
            stack.append((child, path, depth + 1))

    def add_reach(self, item_id: str, path: str) -> None:
        self.reach.setdefault(item_id, [])
        if path not in self.reach[item_id]:
            self.reach[item_id].append(path)

    def canonical(self, item_id: str) -> str:
        # The shortest public path, then the first in name order: stable across runs.
        return min(self.reach[item_id], key=lambda p: (p.count("::"), p))

    def external_path(self, item_id) -> str | None:
        summary = self.paths.get(str(item_id)) if item_id is not None else None
        if summary is None:
            return None
        parts = list(summary["path"])
        if parts and parts[0] in ("core", "alloc"):
            parts[0] = "std"
        return "::".join(parts)

    def name_of(self, item_id, written: str) -> str:
        key = str(item_id)
        if key in self.reach:
            return self.canonical(key)
        return self.external_path(item_id) or written

    # ---- output -------------------------------------------------------------------------

    def render(self) -> list[str]:
        self.walk()
        for path, source in self.foreign:
            self.lines.add(f"{path} re-export of {source}")
        for item_id, paths in self.reach.items():
            canonical = self.canonical(item_id)
            for path in paths:
                if path != canonical:
                    self.lines.add(f"{path} re-export of {canonical}")
            self.item(item_id, canonical)
        return sorted(self.lines)

    def emit(self, path: str, kind: str, sig: str = "") -> None:
        self.lines.add(" ".join(part for part in (path, kind, sig.strip()) if part))

    def item(self, item_id: str, path: str) -> None:
        item = self.index[item_id]
        kind, inner = one(item["inner"])
        attrs = self.attrs(item)
        if kind == "module":
            self.emit(path, "mod")
        elif kind == "struct":
            self.struct(path, inner, attrs)
        elif kind == "enum":
            self.enum(path, inner, attrs)
        elif kind == "union":
            self.emit(path, "union", attrs + self.generics(inner["generics"]))
            self.fields(path, inner["fields"])
            self.impls(path, inner["impls"])
        elif kind == "function":
            self.emit(path, "fn", attrs + self.function(inner))
        elif kind == "trait":
            self.trait(path, inner, attrs)
        elif kind == "type_alias":
            sig = self.generics(inner["generics"]) + " = " + self.ty(inner["type"])
            self.emit(path, "type", attrs + sig)
        elif kind == "constant":
            self.emit(path, "const", ": " + self.ty(inner["type"]))
        elif kind == "static":
            mutable = "mut " if inner.get("is_mutable") else ""
            self.emit(path, "static", f"{mutable}: " + self.ty(inner["type"]))
        elif kind in ("macro", "proc_macro"):
            self.emit(path, kind)
        elif kind == "trait_alias":
            self.emit(path, "trait alias", self.bounds(inner.get("params", [])))
        else:
            self.emit(path, kind)

    def attrs(self, item: dict) -> str:
        # Only the attributes that change what other crates may do with an item.
        out = []
        for attr in item.get("attrs", []):
            if attr == "non_exhaustive":
                out.append("#[non_exhaustive]")
            elif isinstance(attr, dict) and "repr" in attr:
                out.append("#[repr]")
            elif isinstance(attr, str) and "non_exhaustive" in attr:
                out.append("#[non_exhaustive]")
        return " ".join(out) + (" " if out else "")

    def struct(self, path: str, inner: dict, attrs: str) -> None:
        generics = self.generics(inner["generics"])
        shape = inner["kind"]
        if shape == "unit":
            self.emit(path, "struct", f"{attrs}{generics};")
        elif "tuple" in shape:
            fields = ", ".join(
                "_" if f is None else self.ty(one(self.index[str(f)]["inner"])[1])
                for f in shape["tuple"]
            )
            self.emit(path, "struct", f"{attrs}{generics}({fields})")
        else:
            plain = shape["plain"]
            private = " .." if plain["has_stripped_fields"] else ""
            self.emit(path, "struct", f"{attrs}{generics} {{{private} }}".replace("{ }", "{}"))
            self.fields(path, plain["fields"])
        self.impls(path, inner["impls"])

    def fields(self, path: str, fields: list) -> None:
        for field_id in fields:
            field = self.index[str(field_id)]
            self.emit(f"{path}::{field['name']}", "field", ": " + self.ty(field["inner"]["struct_field"]))

    def enum(self, path: str, inner: dict, attrs: str) -> None:
        hidden = " .." if inner.get("has_stripped_variants") else ""
        self.emit(path, "enum", f"{attrs}{self.generics(inner['generics'])}{hidden}")
        for variant_id in inner["variants"]:
            variant = self.index[str(variant_id)]
            shape = variant["inner"]["variant"]["kind"]
            vpath = f"{path}::{variant['name']}"
            vattrs = self.attrs(variant).strip()
            if shape in ("plain", "unit"):
                self.emit(vpath, "variant", vattrs)
            elif "tuple" in shape:
                fields = ", ".join(
                    "_" if f is None else self.ty(self.index[str(f)]["inner"]["struct_field"])
                    for f in shape["tuple"]
                )
                self.emit(vpath, "variant", f"{vattrs}({fields})".strip())
            else:
                plain = shape["struct"] if "struct" in shape else shape["plain"]
                private = " .." if plain.get("has_stripped_fields") else ""
                self.emit(vpath, "variant", f"{vattrs} {{{private} }}".replace("{ }", "{}"))
                self.fields(vpath, plain["fields"])
        self.impls(path, inner["impls"])

    def trait(self, path: str, inner: dict, attrs: str) -> None:
        flags = ("unsafe " if inner.get("is_unsafe") else "") + (
            "auto " if inner.get("is_auto") else ""
        )
        supertraits = self.bounds(inner.get("bounds", []))
        sig = f"{attrs}{flags}{self.generics(inner['generics'])}"
        if supertraits:
            sig += f": {supertraits}"
        if not inner.get("is_dyn_compatible", True):
            sig += " (not dyn-compatible)"
        self.emit(path, "trait", sig.strip())
        for member_id in inner["items"]:
            self.assoc(path, self.index[str(member_id)], in_trait=True)

    def assoc(self, path: str, member: dict, in_trait: bool) -> None:
        kind, inner = one(member["inner"])
        mpath = f"{path}::{member['name']}"
        if kind == "function":
            provided = " (provided)" if in_trait and inner.get("has_body") else ""
            self.emit(mpath, "fn", self.function(inner) + provided)
        elif kind == "assoc_type":
            sig = self.generics(inner["generics"])
            if inner.get("bounds"):
                sig += ": " + self.bounds(inner["bounds"])
            if inner.get("type") is not None:
                sig += " = " + self.ty(inner["type"])
            self.emit(mpath, "type", sig)
        elif kind == "assoc_const":
            sig = ": " + self.ty(inner["type"])
            self.emit(mpath, "const", sig)
        else:
            self.emit(mpath, kind)

    def impls(self, path: str, impl_ids: list) -> None:
        for impl_id in impl_ids:
            impl = self.index.get(str(impl_id))
            if impl is None:
                continue
            inner = impl["inner"]["impl"]
            # Auto traits and blanket impls follow from the rest; listing them would churn.
            if inner.get("is_synthetic") or inner.get("blanket_impl") is not None:
                continue
            if inner["trait"] is None:
                for member_id in inner["items"]:
                    member = self.index.get(str(member_id))
                    if member is not None and member.get("visibility") == "public":
                        self.assoc(path, member, in_trait=False)
                continue
            # The compiler's marker for derived equality: it follows from `PartialEq`.
            if self.external_path((inner["trait"] or {}).get("id")) == "std::marker::StructuralPartialEq":
                continue
            negative = "!" if inner.get("is_negative") else ""
            generics = self.generics(inner["generics"])
            head = f"{generics} {negative}{self.path_ty(inner['trait'])} for {self.ty(inner['for'])}"
            head += self.where_clause(inner["generics"])
            assoc = []
            for member_id in inner["items"]:
                member = self.index.get(str(member_id))
                if member is None:
                    continue
                kind, minner = one(member["inner"])
                if kind == "assoc_type" and minner.get("type") is not None:
                    assoc.append(f"type {member['name']} = {self.ty(minner['type'])}")
            if assoc:
                head += " { " + "; ".join(assoc) + " }"
            self.emit(path, "impl", head)

    # ---- signatures ---------------------------------------------------------------------

    def function(self, inner: dict) -> str:
        header = inner["header"]
        flags = "".join(
            word
            for flag, word in (
                ("is_const", "const "),
                ("is_async", "async "),
                ("is_unsafe", "unsafe "),
            )
            if header.get(flag)
        )
        abi = header.get("abi", "Rust")
        if abi != "Rust":
            flags += f'extern "{abi if isinstance(abi, str) else one(abi)[0]}" '
        sig = inner["sig"]
        args = ", ".join(f"{name}: {self.ty(t)}" for name, t in sig["inputs"])
        out = f" -> {self.ty(sig['output'])}" if sig.get("output") is not None else ""
        return f"{flags}fn{self.generics(inner['generics'])}({args}){out}{self.where_clause(inner['generics'])}"

    def generics(self, generics: dict) -> str:
        params = []
        for param in generics["params"]:
            kind, inner = one(param["kind"])
            if kind == "lifetime":
                outlives = " + ".join(inner.get("outlives", []))
                params.append(param["name"] + (f": {outlives}" if outlives else ""))
            elif kind == "type":
                if inner.get("is_synthetic"):
                    continue
                text = param["name"]
                if inner.get("bounds"):
                    text += ": " + self.bounds(inner["bounds"])
                if inner.get("default") is not None:
                    text += " = " + self.ty(inner["default"])
                params.append(text)
            elif kind == "const":
                text = f"const {param['name']}: {self.ty(inner['type'])}"
                if inner.get("default") is not None:
                    text += f" = {inner['default']}"
                params.append(text)
        return f"<{', '.join(params)}>" if params else ""

    def where_clause(self, generics: dict) -> str:
        preds = []
        for pred in generics.get("where_predicates", []):
            kind, inner = one(pred)
            if kind == "bound_predicate":
                preds.append(f"{self.ty(inner['type'])}: {self.bounds(inner['bounds'])}")
            elif kind == "lifetime_predicate":
                preds.append(f"{inner['lifetime']}: {' + '.join(inner['outlives'])}")
            elif kind == "eq_predicate":
                preds.append(f"{self.ty(inner['lhs'])} = {self.term(inner['rhs'])}")
        return f" where {', '.join(preds)}" if preds else ""

    def bounds(self, bounds: list) -> str:
        out = []
        for bound in bounds:
            kind, inner = one(bound)
            if kind == "trait_bound":
                modifier = {"maybe": "?", "maybe_const": "~const "}.get(inner.get("modifier"), "")
                hrtb = self.hrtb(inner.get("generic_params", []))
                out.append(f"{hrtb}{modifier}{self.path_ty(inner['trait'])}")
            elif kind == "outlives":
                out.append(inner)
            elif kind == "use":
                out.append("use<..>")
        return " + ".join(out)

    def hrtb(self, params: list) -> str:
        names = [p["name"] for p in params]
        return f"for<{', '.join(names)}> " if names else ""

    def term(self, term) -> str:
        kind, inner = one(term)
        return self.ty(inner) if kind == "type" else str(inner.get("expr", "_"))

    def path_ty(self, path: dict) -> str:
        name = self.name_of(path.get("id"), path.get("path") or path.get("name", "?"))
        return name + self.args(path.get("args"))

    def args(self, args) -> str:
        if not args:
            return ""
        kind, inner = one(args) if isinstance(args, dict) else (args, None)
        if kind == "angle_bracketed":
            parts = []
            for arg in inner["args"]:
                if arg == "infer":
                    parts.append("_")
                    continue
                akind, ainner = one(arg)
                if akind == "lifetime":
                    parts.append(ainner)
                elif akind == "type":
                    parts.append(self.ty(ainner))
                elif akind == "const":
                    parts.append(str(ainner.get("expr", "_")))
            for c in inner.get("constraints", []):
                bkind, binner = one(c["binding"])
                if bkind == "equality":
                    parts.append(f"{c['name']}{self.args(c.get('args'))} = {self.term(binner)}")
                else:
                    parts.append(f"{c['name']}{self.args(c.get('args'))}: {self.bounds(binner)}")
            return f"<{', '.join(parts)}>" if parts else ""
        if kind == "parenthesized":
            inputs = ", ".join(self.ty(t) for t in inner["inputs"])
            out = f" -> {self.ty(inner['output'])}" if inner.get("output") is not None else ""
            return f"({inputs}){out}"
        return "(..)"

    def ty(self, t) -> str:
        if t is None:
            return "()"
        if t == "infer":
            return "_"
        kind, inner = one(t)
        if kind == "resolved_path":
            return self.path_ty(inner)
        if kind == "generic":
            return inner
        if kind == "primitive":
            return inner
        if kind == "borrowed_ref":
            life = f"{inner['lifetime']} " if inner.get("lifetime") else ""
            mutable = "mut " if inner["is_mutable"] else ""
            return f"&{life}{mutable}{self.ty(inner['type'])}"
        if kind == "raw_pointer":
            return f"*{'mut' if inner['is_mutable'] else 'const'} {self.ty(inner['type'])}"
        if kind == "slice":
            return f"[{self.ty(inner)}]"
        if kind == "array":
            return f"[{self.ty(inner['type'])}; {inner['len']}]"
        if kind == "tuple":
            return f"({', '.join(self.ty(x) for x in inner)}{',' if len(inner) == 1 else ''})"
        if kind == "impl_trait":
            return f"impl {self.bounds(inner)}"
        if kind == "dyn_trait":
            traits = " + ".join(
                self.hrtb(p.get("generic_params", [])) + self.path_ty(p["trait"])
                for p in inner["traits"]
            )
            life = f" + {inner['lifetime']}" if inner.get("lifetime") else ""
            return f"dyn {traits}{life}"
        if kind == "qualified_path":
            trait = inner.get("trait")
            self_ty = self.ty(inner["self_type"])
            base = f"<{self_ty} as {self.path_ty(trait)}>" if trait else self_ty
            return f"{base}::{inner['name']}{self.args(inner.get('args'))}"
        if kind == "function_pointer":
            sig = inner["sig"]
            args = ", ".join(self.ty(x) for _, x in sig["inputs"])
            out = f" -> {self.ty(sig['output'])}" if sig.get("output") is not None else ""
            return f"{self.hrtb(inner.get('generic_params', []))}fn({args}){out}"
        if kind == "pat":
            return self.ty(inner["type"])
        return kind


def one(value):
    """The single (key, value) of a one-entry dict (rustdoc's enums), or (string, None)."""
    if isinstance(value, str):
        return value, None
    ((key, inner),) = value.items()
    return key, inner


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    version = doc.get("format_version")
    if version not in KNOWN_FORMAT_VERSIONS:
        print(
            f"rustdoc JSON format version {version} is not one this renderer reads "
            f"({sorted(KNOWN_FORMAT_VERSIONS)}): check the rendering and extend "
            "KNOWN_FORMAT_VERSIONS in scripts/public_api.py",
            file=sys.stderr,
        )
        return 2
    for line in Renderer(doc).render():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
