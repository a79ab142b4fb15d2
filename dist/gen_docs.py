#!/usr/bin/env python3
"""Man pages and bash completion for xcargo, xcargo-loader and xcargo-slurm, made from their own
--help text (CLI11's layout; xcargo-slurm's docstring layout), so that neither can drift from the
programs.

gen_docs.py --xcargo BIN --loader BIN --slurm SCRIPT --version V --out DIR VERB...
writes DIR/man1/{xcargo,xcargo-VERB,xcargo-loader,xcargo-slurm}.1 and
DIR/completions/{xcargo,xcargo-loader}.
"""
import argparse
import os
import re
import subprocess

FILE_KINDS = {"FILE", "KEY", "PATH", "CARGO", "SRC"}
# Values offered for a kind of value whose --help gives no {choices}: each word must appear in
# the option's --help text (main() fails otherwise), so the list cannot drift from xcargo's.
LISTED_VALUES = {"TARGET": ["bitcode", "x86_64", "aarch64", "riscv64"]}
# Options whose values are names in the cargo named on the command line: what
# _xcargo_cargo_names reads from `xcargo inspect CARGO --json`.
CARGO_NAMES = {"--entry": "entries", "--variant": "variants"}
SECTION = re.compile(r"^([A-Z][A-Za-z ]*):$")


def help_text(argv):
    env = dict(os.environ, COLUMNS="100")
    r = subprocess.run(argv + ["--help"], capture_output=True, text=True, env=env, check=True)
    return r.stdout


def parse(text):
    """Returns (description lines, usage, {section: [(names, value, description)]}, footer lines)."""
    lines = text.rstrip("\n").split("\n")
    desc, usage, sections, footer = [], "", {}, []
    i = 0
    while i < len(lines) and not lines[i].startswith("Usage: "):
        desc.append(lines[i])
        i += 1
    if i < len(lines):
        usage = lines[i][len("Usage: "):]
        i += 1
    while i < len(lines):
        line = lines[i]
        m = SECTION.match(line)
        if m:
            items = sections.setdefault(m.group(1), [])
            i += 1
            while i < len(lines) and lines[i].strip():
                line = lines[i]
                if line.startswith("  ") and not line.startswith("   "):
                    head, _, rest = line[2:].partition("  ")
                    items.append([head.strip(), rest.strip()])
                elif items:
                    items[-1][1] = (items[-1][1] + "\n" + line.strip()).strip()
                i += 1
            continue
        if line.strip() or footer:
            footer.append(line)
        i += 1
    entries = {}
    for name, items in sections.items():
        entries[name] = []
        for head, text in items:
            words = head.split(" ", 1)
            value = words[1] if len(words) > 1 else ""
            if value.startswith(("REQUIRED", "Excludes:", "Needs:")):
                value = ""
            entries[name].append((words[0], value, head, text))
    while footer and not footer[-1].strip():
        footer.pop()
    return [d for d in desc if d.strip()], usage, entries, footer


def roff(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + l if l.startswith((".", "'")) else l) for l in s.split("\n"))


def name_line(name, desc):
    """The NAME section's text: what the program does, without the "PROGRAM: " its --help starts with."""
    what = desc[0] if desc else name
    return what[len(name) + 2:] if what.startswith(name + ": ") else what


def man_page(name, section_title, version, parsed, see_also):
    desc, usage, sections, footer = parsed
    out = [f'.TH {name.upper()} 1 "" "xcargo {version}" "{section_title}"',
           ".SH NAME", f"{roff(name)} \\- {roff(name_line(name, desc))}",
           ".SH SYNOPSIS", f".B {roff(usage.split(' [')[0])}", roff(usage[len(usage.split(' [')[0]):].strip())]
    if len(desc) > 1:
        out += [".SH DESCRIPTION", roff(" ".join(desc[1:]))]
    for title, items in sections.items():
        out.append(".SH " + title.upper())
        for _, _, head, text in items:
            out += [".TP", ".B " + roff(head), roff(text)]
    if footer:
        out += [".SH NOTES", ".nf", roff("\n".join(footer)), ".fi"]
    out += [".SH SEE ALSO", ", ".join(f"\\fB{roff(s)}\\fR(1)" for s in see_also)]
    return "\n".join(out) + "\n"


def slurm_page(version, text):
    """xcargo-slurm's man page from its --help (the script's docstring): a first line
    "xcargo-slurm: WHAT", a "Usage:" block, paragraphs, an "Options:" block of
    "  --flag VALUE   text" entries, more paragraphs (indented lines kept as they are), and a
    last "Exit status: ..." paragraph."""
    paras = text.strip("\n").split("\n\n")
    what = name_line("xcargo-slurm", paras.pop(0).split("\n")[:1]).rstrip(".")
    out = [f'.TH XCARGO-SLURM 1 "" "xcargo {version}" "User Commands"', ".SH NAME", f"xcargo\\-slurm \\- {roff(what)}"]
    if paras and paras[0].startswith("Usage:"):
        out += [".SH SYNOPSIS", ".nf"] + [roff(l.strip()) for l in paras.pop(0).split("\n")[1:]] + [".fi"]
    out.append(".SH DESCRIPTION")
    for p in paras:
        lines = p.split("\n")
        if lines[0] == "Options:":
            out.append(".SH OPTIONS")
            for l in lines[1:]:
                if l.startswith("  ") and not l.startswith("   "):
                    head, _, rest = l[2:].partition("  ")
                    out += [".TP", ".B " + roff(head.strip()), roff(rest.strip())]
                else:
                    out.append(roff(l.strip()))
            out.append(".SH NOTES")
        elif p.startswith("Exit status:"):
            out += [".SH EXIT STATUS", roff(" ".join(l.strip() for l in lines)[len("Exit status:"):].strip())]
        elif any(l.startswith("  ") for l in lines):
            out += [".PP", ".nf", roff(p), ".fi"]
        else:
            out += [".PP", roff(" ".join(lines))]
    out += [".SH SEE ALSO", "\\fBxcargo\\fR(1), \\fBxcargo\\-loader\\fR(1), \\fBsrun\\fR(1)"]
    return "\n".join(out) + "\n"


def choices(value):
    m = re.search(r"\{([^}]*)\}", value)
    return m.group(1).split(",") if m else None


def completion_cases(func_prefix, options, xcargo_helpers=False):
    """case arms completing an option's value: its choices, else file names. With
    xcargo_helpers, also LISTED_VALUES and CARGO_NAMES (through the functions
    XCARGO_HELPERS defines)."""
    arms = []
    for names, value, _, text in options:
        if not value:
            continue
        pattern = "|".join(f"{func_prefix}{n}" for n in names.split(","))
        c = choices(value)
        kind = value.split(" ")[0].split("=")[0].split(":")[0]
        cargo_names = next((CARGO_NAMES[n] for n in names.split(",") if n in CARGO_NAMES), None)
        if xcargo_helpers and kind in LISTED_VALUES:
            missing = [w for w in LISTED_VALUES[kind] if w not in text]
            if missing:
                raise SystemExit(f"gen_docs.py: {names} no longer names {missing} in its --help: update LISTED_VALUES")
            action = f"_xcargo_list '{' '.join(LISTED_VALUES[kind])}'"
        elif xcargo_helpers and cargo_names:
            action = f"_xcargo_cargo_names {cargo_names}"
        elif c:
            action = f"COMPREPLY=($(compgen -W '{' '.join(c)}' -- \"$cur\"))"
        elif kind == "DIR":
            action = 'COMPREPLY=($(compgen -d -- "$cur"))'
        elif kind in FILE_KINDS:
            action = 'COMPREPLY=($(compgen -f -- "$cur"))'
        else:
            action = "COMPREPLY=()"  # a name, number or address: nothing to offer
        arms.append(f"    {pattern}) {action}; return ;;")
    return arms


def option_words(options):
    return " ".join(n for names, _, _, _ in options for n in names.split(","))


XCARGO_HELPERS = r"""# _xcargo_list WORDS: the last item of a comma-separated list ($cur), from WORDS.
_xcargo_list() {
  local before=""
  [[ "$cur" == *,* ]] && before="${cur%,*},"
  COMPREPLY=($(compgen -W "$1" -P "$before" -- "${cur##*,}"))
}
# _xcargo_cargo_names entries|variants: those names in the cargo named on the line (a word
# ending in .xcargo, else the first file that is not an option's value), as
# `xcargo inspect CARGO --json` prints them.
_xcargo_cargo_names() {
  local i w cargo=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]/#\~/$HOME}"
    if [[ -f "$w" && "$w" == *.xcargo ]]; then cargo="$w"; break; fi
    if [[ -z "$cargo" && -f "$w" && "${COMP_WORDS[i-1]}" != -* ]]; then cargo="$w"; fi
  done
  [[ -n "$cargo" ]] || { COMPREPLY=(); return; }
  local names
  names=$("${COMP_WORDS[0]/#\~/$HOME}" inspect "$cargo" --json 2>/dev/null | awk -v want="$1" '
    want == "entries" && /^  "entries": \[/ { on = 1; next }
    on && /^  \]/ { exit }
    on { gsub(/[ ",]/, ""); print }
    want == "variants" && /^      "name": "/ { sub(/^ *"name": "/, ""); sub(/",?$/, ""); print }')
  COMPREPLY=($(compgen -W "$names" -- "$cur"))
}
"""


def xcargo_completion(top, verbs):
    _, _, sections, _ = top
    top_opts = sections.get("Options", [])
    lines = ["# bash completion for xcargo (generated from its --help by dist/gen_docs.py)",
             XCARGO_HELPERS + "_xcargo() {",
             '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" verb="" i',
             "  for ((i = 1; i < COMP_CWORD; i++)); do",
             f'    case "${{COMP_WORDS[i]}}" in help|{"|".join(verbs)}) verb="${{COMP_WORDS[i]}}"; break ;; esac',
             "  done",
             "  # xcargo help VERB is xcargo VERB --help.",
             f'  if [[ "$verb" == help ]]; then COMPREPLY=($(compgen -W "{" ".join(verbs)}" -- "$cur")); return; fi',
             '  case "$verb:$prev" in']
    for verb, parsed in verbs.items():
        lines += completion_cases(f"{verb}:", parsed[2].get("Options", []), xcargo_helpers=True)
    lines += completion_cases("*:", top_opts, xcargo_helpers=True)
    lines += ["  esac",
              '  if [[ -z "$verb" ]]; then',
              f'    COMPREPLY=($(compgen -W "help {" ".join(verbs)} {option_words(top_opts)}" -- "$cur")); return',
              "  fi",
              '  if [[ "$cur" == -* ]]; then',
              '    case "$verb" in']
    for verb, parsed in verbs.items():
        lines.append(f'      {verb}) COMPREPLY=($(compgen -W "{option_words(parsed[2].get("Options", []))}" -- "$cur")) ;;')
    lines += ["    esac", "  else", '    COMPREPLY=($(compgen -f -- "$cur"))', "  fi", "}",
              "complete -o filenames -F _xcargo xcargo", ""]
    return "\n".join(lines)


def loader_completion(parsed):
    opts = parsed[2].get("Options", [])
    lines = ["# bash completion for xcargo-loader (generated from its --help by dist/gen_docs.py)",
             "_xcargo_loader() {",
             '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
             '  case "$prev" in']
    lines += completion_cases("", opts)
    lines += ["  esac", f'  COMPREPLY=($(compgen -W "{option_words(opts)}" -- "$cur"))', "}",
              "complete -o filenames -F _xcargo_loader xcargo-loader", ""]
    return "\n".join(lines)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--xcargo", required=True)
    ap.add_argument("--loader", required=True)
    ap.add_argument("--slurm", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("verbs", nargs="+")
    a = ap.parse_args()
    top = parse(help_text([a.xcargo]))
    verbs = {v: parse(help_text([a.xcargo, v])) for v in a.verbs}
    loader = parse(help_text([a.loader]))
    listed = [e[0] for e in top[2].get("Subcommands", [])]
    if sorted(listed) != sorted(a.verbs):
        raise SystemExit(f"gen_docs.py: xcargo --help lists verbs {listed}, CMake gave {a.verbs}: update dist/CMakeLists.txt")
    pages = [f"xcargo-{v}" for v in a.verbs]
    write(f"{a.out}/man1/xcargo.1", man_page("xcargo", "User Commands", a.version, top, pages + ["xcargo-loader", "xcargo-slurm"]))
    for v, parsed in verbs.items():
        write(f"{a.out}/man1/xcargo-{v}.1", man_page(f"xcargo-{v}", "User Commands", a.version, parsed, ["xcargo"]))
    write(f"{a.out}/man1/xcargo-loader.1",
          man_page("xcargo-loader", "System Administration", a.version, loader, ["xcargo", "systemd.service"]))
    write(f"{a.out}/man1/xcargo-slurm.1", slurm_page(a.version, help_text([a.slurm])))
    write(f"{a.out}/completions/xcargo", xcargo_completion(top, verbs))
    write(f"{a.out}/completions/xcargo-loader", loader_completion(loader))


if __name__ == "__main__":
    main()
