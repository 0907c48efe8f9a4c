"""mounts.py: reading the mount table, and telling where inotify cannot see others' changes.

A network or FUSE mount cannot be made here, so the decision is tested on mount tables as the
kernel writes them; a daemon on a local disk watching with inotify is in test_live.py."""

from __future__ import annotations

from pathlib import Path

from markindex_core.serve.mounts import parse_table, remote_file_system

_TABLE = """\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
40 27 0:50 / /srv/share rw,relatime shared:12 master:3 - nfs4 server:/export rw,vers=4.2
41 27 0:51 / /home/ann/remote\\040docs rw,nosuid - fuse.sshfs ann@host:/docs rw,user_id=0
42 27 8:17 / /media/usb rw - fuseblk /dev/sdb1 rw,user_id=0
43 27 0:52 / /data/lib/vendor rw - cifs //nas/vendor rw
44 27 0:53 / /mnt/c rw,noatime - 9p drvfs rw,aname=drvfs
45 44 254:0 /other /mnt/c rw - ext4 /dev/vda rw
"""


def test_the_table_gives_each_mount_point_and_type() -> None:
    table = parse_table(_TABLE)
    assert ("/srv/share", "nfs4") in table  # optional fields before the ` - ` are skipped
    assert ("/home/ann/remote docs", "fuse.sshfs") in table  # \040 is a space
    assert len(table) == 7
    assert parse_table("garbage\n1 2 3\n") == []


def test_remote_file_systems_are_named_and_local_ones_are_not() -> None:
    table = parse_table(_TABLE)
    assert remote_file_system(Path("/srv/share/laws"), table) == "nfs4 at /srv/share"
    assert remote_file_system(Path("/home/ann/remote docs"), table) == (
        "fuse.sshfs at /home/ann/remote docs"
    )
    assert remote_file_system(Path("/media/usb/notes"), table) is None  # ntfs-3g: a local disk
    assert remote_file_system(Path("/srv/shared"), table) is None  # a name prefix, not a parent
    assert remote_file_system(Path("/home/bob"), table) is None
    # A library holding a share holds files others change, too.
    assert remote_file_system(Path("/home/ann"), table) == "fuse.sshfs at /home/ann/remote docs"


def test_a_share_mounted_inside_the_library_counts() -> None:
    assert remote_file_system(Path("/data/lib"), parse_table(_TABLE)) == "cifs at /data/lib/vendor"


def test_the_last_of_two_mounts_on_one_point_is_the_one_seen() -> None:
    # /mnt/c: a 9p share, then a local bind mount over it (the later mount hides the first).
    assert remote_file_system(Path("/mnt/c/docs"), parse_table(_TABLE)) is None
