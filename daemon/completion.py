"""``preemptd completion bash|zsh``: shell completion, generated from the command line's parser.

The script is written from the argparse parser itself, so a command or an option added
to :mod:`.cli` completes without anything being kept in step by hand. What completes:
the commands; each command's options; an option's values when it has a fixed set
(``-o``: table, wide, json, ...), file names for options that take a file and for
positional files (snapshots, a scenario); nothing for free values (``--now``).
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterable

__all__ = ["completion_script"]

# Options whose value is a path (by their metavar): complete file names.
_PATH_METAVARS = frozenset({"FILE", "DIR", "OUT", "OTHER.toml"})


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``parser``'s program for ``shell`` (bash or zsh)."""
    commands = _commands(parser)
    if shell == "bash":
        return _bash(parser.prog, parser, commands)
    if shell == "zsh":
        return _zsh(parser.prog, parser, commands)
    raise ValueError(f"unknown shell {shell!r}")


def _commands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Each command's help line and parser, in the order they were registered."""
    found: dict[str, tuple[str, argparse.ArgumentParser]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found[name] = (helps.get(name, ""), sub)
    return found


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if action.option_strings]


def _positionals(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        action
        for action in parser._actions
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction)
    ]


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _is_path(action: argparse.Action) -> bool:
    return action.choices is None and str(action.metavar) in _PATH_METAVARS


def _words(values: Iterable[object]) -> str:
    return " ".join(str(value) for value in values)


# --- bash ----------------------------------------------------------------------------------


def _bash(prog: str, parser: argparse.ArgumentParser, commands: dict[str, tuple[str, argparse.ArgumentParser]]) -> str:
    function = "_" + re.sub(r"\W", "_", prog)
    top = [option for action in _options(parser) for option in action.option_strings]
    lines = [
        f"# bash completion for {prog}: source <({prog} completion bash)",
        f"{function}() {{",
        "    local cur prev cmd word",
        '    cur="${COMP_WORDS[COMP_CWORD]}"',
        '    prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    cmd=""',
        '    for word in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do',
        '        case "$word" in -*) ;; *) cmd="$word"; break ;; esac',
        "    done",
        '    if [[ -z "$cmd" ]]; then',
        f'        COMPREPLY=($(compgen -W {shlex.quote(_words([*commands, *top]))} -- "$cur"))',
        "        return",
        "    fi",
        '    case "$cmd" in',
    ]
    for name, (_, sub) in commands.items():
        options = _options(sub)
        lines.append(f"    {shlex.quote(name)})")
        lines.append('        case "$prev" in')
        for action in options:
            if not _takes_value(action):
                continue
            pattern = "|".join(shlex.quote(option) for option in action.option_strings)
            if action.choices is not None:
                reply = f'COMPREPLY=($(compgen -W {shlex.quote(_words(action.choices))} -- "$cur"))'
            elif _is_path(action):
                reply = 'COMPREPLY=($(compgen -f -- "$cur"))'
            else:
                reply = "COMPREPLY=()"
            lines.append(f"            {pattern}) {reply}; return ;;")
        lines.append("        esac")
        words = _words(option for action in options for option in action.option_strings)
        lines.append('        if [[ "$cur" == -* ]]; then')
        lines.append(f'            COMPREPLY=($(compgen -W {shlex.quote(words)} -- "$cur"))')
        choices = [choice for action in _positionals(sub) if action.choices for choice in action.choices]
        if choices:
            lines.append("        else")
            lines.append(f'            COMPREPLY=($(compgen -W {shlex.quote(_words(choices))} -- "$cur"))')
        elif _positionals(sub):
            lines.append("        else")
            lines.append('            COMPREPLY=($(compgen -f -- "$cur"))')
        lines.append("        fi")
        lines.append("        ;;")
    lines += ["    esac", "}", f"complete -o filenames -F {function} {prog}", ""]
    return "\n".join(lines)


# --- zsh -----------------------------------------------------------------------------------


def _zsh_text(text: str | None) -> str:
    """A help text inside ``[...]`` of an _arguments spec: no brackets, colons or quotes."""
    return re.sub(r"[\[\]:'\\`$]", " ", text or "").strip()


def _zsh_spec(action: argparse.Action) -> str:
    options = action.option_strings
    help_text = _zsh_text(action.help)
    if _takes_value(action):
        if action.choices is not None:
            value = f":{action.dest}:({_words(action.choices)})"
        elif _is_path(action):
            value = f":{action.dest}:_files"
        else:
            value = f":{action.dest}: "
    else:
        value = ""
    if len(options) == 1:
        return shlex.quote(f"{options[0]}[{help_text}]{value}")
    exclusive = f"({' '.join(options)})"
    return shlex.quote(exclusive) + "{" + ",".join(options) + "}" + shlex.quote(f"[{help_text}]{value}")


def _zsh(prog: str, parser: argparse.ArgumentParser, commands: dict[str, tuple[str, argparse.ArgumentParser]]) -> str:
    function = "_" + re.sub(r"\W", "_", prog)
    described = " ".join(shlex.quote(f"{name}:{_zsh_text(help_text)}") for name, (help_text, _) in commands.items())
    lines = [
        f"#compdef {prog}",
        f"# zsh completion for {prog}: {prog} completion zsh > \"${{fpath[1]}}/_{prog}\"",
        f"{function}() {{",
        "    local -a commands",
        f"    commands=({described})",
        "    if (( CURRENT == 2 )); then",
        "        _describe command commands",
        "        return",
        "    fi",
        "    local cmd=$words[2]",
        "    shift words",
        "    (( CURRENT-- ))",
        "    case $cmd in",
    ]
    for name, (_, sub) in commands.items():
        specs = [_zsh_spec(action) for action in _options(sub)]
        for action in _positionals(sub):
            many = "*" if action.nargs in ("*", "+") else ""
            if action.choices:
                specs.append(shlex.quote(f"{many}:{action.dest}:({_words(action.choices)})"))
            else:
                specs.append(shlex.quote(f"{many}:{action.dest}:_files"))
        lines.append(f"        {shlex.quote(name)}) _arguments {' '.join(specs)} ;;")
    lines += ["    esac", "}", f'{function} "$@"', ""]
    return "\n".join(lines)
