"""Which of the first build's artifacts a clean rebuild must have produced again."""

from crossbuild.proof.verify import missing_from_rebuild


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
