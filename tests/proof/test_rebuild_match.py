"""Which of the first build's artifacts a clean rebuild must have produced again."""

import os

from crossbuild.proof.rebuild_check import copies_of, missing_from_rebuild


def test_hashed_folders_match_across_the_rebuild_but_each_artifact_is_claimed_once():
    first = {"lib/obj/conf_0d2a6efa12f104987fdbdc2cff43246a/dynamic/libzstd.so.1.5.4",
             "lib/obj/conf_78953c527d73e8a61e911350017c4e0e/static/libzstd.a", "programs/zstd"}
    again = {"lib/obj/conf_11111111111111111111111111111111/dynamic/libzstd.so.1.5.4",
             "lib/obj/conf_22222222222222222222222222222222/static/libzstd.a", "programs/zstd"}
    assert missing_from_rebuild(first, again) == []
    # a product the rebuild did not make is still missing, hashed folder or not
    assert missing_from_rebuild(first, again - {"programs/zstd"}) == ["programs/zstd"]
    partial = {"lib/obj/conf_11111111111111111111111111111111/dynamic/libzstd.so.1.5.4", "programs/zstd"}
    assert missing_from_rebuild(first, partial) == ["lib/obj/conf_78953c527d73e8a61e911350017c4e0e/static/libzstd.a"]
    # two hashed variants of one file need two rebuilt ones
    two = {"obj/conf_aaaaaaaaaaaaaaaaaaaa/libx.a", "obj/conf_bbbbbbbbbbbbbbbbbbbb/libx.a"}
    assert missing_from_rebuild(two, {"obj/conf_cccccccccccccccccccc/libx.a"}) == \
        ["obj/conf_bbbbbbbbbbbbbbbbbbbb/libx.a"]
    # only folder names are hashes: a differently named file is not the same artifact
    assert missing_from_rebuild({"out/libdeadbeefdeadbeefdead.so"}, {"out/libfeedfacefeedfacefeed.so"}) == \
        ["out/libdeadbeefdeadbeefdead.so"]


def test_an_install_copy_of_a_product_both_builds_have_is_no_product_of_its_own(tmp_path):
    """lua5.4's Makefile installs into the source folder (debian/tmp), and that install failed partway: the rebuild
    does not replay it. Its byte-identical copies are not missing products; a file that differs is."""
    (tmp_path / "src").mkdir()
    (tmp_path / "debian/tmp/bin").mkdir(parents=True)
    (tmp_path / "src/lua").write_bytes(b"\x7fELF program")
    (tmp_path / "src/luac").write_bytes(b"\x7fELF compiler")
    (tmp_path / "debian/tmp/bin/lua").write_bytes(b"\x7fELF program")
    (tmp_path / "debian/tmp/bin/luac").write_bytes(b"\x7fELF compilex")  # same size, other bytes
    os.symlink("../../../src/luac", tmp_path / "debian/tmp/bin/link")  # a link is never taken as a copy
    missing = ["debian/tmp/bin/lua", "debian/tmp/bin/luac", "debian/tmp/bin/link"]
    assert copies_of(tmp_path, missing, {"src/lua", "src/luac"}) == {"debian/tmp/bin/lua"}
    assert copies_of(tmp_path, missing, {"src/luac"}) == set()
