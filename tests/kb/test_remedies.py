"""A knowledge-base remedy checked against the real compiler: the code pattern behind an entry fails with zig's
libc++ the way the entry's symptom says, the knowledge base recognises that output, and the flags of the entry's
own action make the same code compile."""

from __future__ import annotations

import shlex
import subprocess

from crossbuild import kb

KB = kb.load()

# an allocator derived from std::allocator with no rebind of its own (the pattern of zeromq's secure_allocator_t)
DERIVED_ALLOCATOR = """#include <memory>
#include <vector>
template <typename T> struct guarded : std::allocator<T> {
    guarded() {}
    template <class U> guarded(const guarded<U> &) {}
    T *allocate(std::size_t n) { return static_cast<T *>(::operator new(n * sizeof(T))); }
    void deallocate(T *p, std::size_t) { ::operator delete(p); }
};
int main() { std::vector<unsigned char, guarded<unsigned char>> v(3); return v.size() == 3 ? 0 : 1; }
"""


def _compile(zig: str, tmp_path, flags: list[str]) -> subprocess.CompletedProcess:
    (tmp_path / "a.cpp").write_text(DERIVED_ALLOCATOR)
    return subprocess.run([zig, "c++", "-target", "aarch64-linux-musl", *flags, "-c", "a.cpp", "-o", "a.o"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_an_allocator_rebinding_to_std_allocator_compiles_with_the_entrys_standard(zig, tmp_path):
    failed = _compile(zig, tmp_path, ["-std=gnu++17"])
    assert failed.returncode != 0
    [first, *_] = KB.search(failed.stderr, limit=3)
    assert first.entry.id == "allocator-rebinds-to-std-allocator" and first.how == "fingerprint", failed.stderr
    [action] = [a for a in first.entry.actions if a.when == "autotools"]
    [cxxflags] = [arg.removeprefix("CXXFLAGS=") for arg in action.args if arg.startswith("CXXFLAGS=")]
    # configure passes CXXFLAGS after the standard a project's own check put into CXX: the last -std wins
    fixed = _compile(zig, tmp_path, ["-std=gnu++17", *shlex.split(cxxflags)])
    assert fixed.returncode == 0, fixed.stderr
