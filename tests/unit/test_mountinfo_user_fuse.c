/* The user-FUSE verdict on crafted mount tables (proto/user_fuse.c,
 * proto/mount_layers.c): a user's FUSE mount is refused whatever its
 * source and type say, at the top or below an overlay, and what cannot be
 * told is refused too (issue 37). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "mountinfo.h"
#include "user_fuse.h"
#include "unit.h"

#define BASE "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n" \
	     "2 1 8:2 / /home rw - ext4 /dev/sda2 rw\n"

static char why[1024];

/* The verdict on mount id in text: 1 refused, 0 fine, -1 table broken. */
static int judge_as(const char *text, uint64_t id, bool any_fuse)
{
	struct squash_mount_table t;
	int r;

	why[0] = '\0';
	if (squash_mount_table_parse(strdup(text), &t) != 0) {
		squash_mount_table_free(&t);
		return -1;
	}
	r = squash_user_fuse_judge(&t, id, any_fuse, why, sizeof(why));
	squash_mount_table_free(&t);
	return r;
}

static int judge(const char *text, uint64_t id)
{
	return judge_as(text, id, false);
}

static void top_mounts(void)
{
	CHECK_INT(judge(BASE, 2), 0);
	CHECK_INT(judge(BASE "3 2 0:50 / /home/u/f rw - fuse.sshfs u@h:/ rw,user_id=1001,group_id=1001\n", 3), 1);
	CHECK_CONTAINS(why, "is on a FUSE file system that uid 1001 mounted");
	CHECK_INT(judge(BASE "3 2 0:50 / /srv rw - fuse.s s rw,user_id=0,group_id=0,allow_other\n", 3), 0);
	CHECK_INT(judge(BASE "3 2 0:50 / /srv rw - fuse.s s rw,user_id=0,group_id=0\n", 3), 1);
	CHECK_CONTAINS(why, "mounted without allow_other");
	CHECK_INT(judge(BASE "3 2 0:50 / /srv rw - fuseblk /dev/sdc rw,user_id=0,group_id=0,allow_other\n", 3), 0);
	/* Not in this namespace. */
	CHECK_INT(judge(BASE, 77), 1);
	CHECK_CONTAINS(why, "another mount namespace");
}

/* The source, the subtype and the mount point are a user's to choose. */
static void crafted_names(void)
{
	CHECK_INT(judge(BASE "3 2 0:50 / /home/u/f rw - fuse.x xxxxxxxxxxxxxxxxxxxxxallow_other "
			     "rw,user_id=1001,group_id=1001\n", 3), 1);
	CHECK_CONTAINS(why, "uid 1001 mounted");
	CHECK_INT(judge(BASE "3 2 0:50 / /home/u/f rw - fuse.x a\\040rw,user_id=0,allow_other "
			     "rw,user_id=1001,group_id=1001\n", 3), 1);
	CHECK_CONTAINS(why, "uid 1001 mounted");
	CHECK_INT(judge(BASE "3 2 0:50 / /home/u/user_id=0,allow_other rw - fuse.user_id=0,allow_other "
			     "user_id=0,allow_other rw,user_id=1001,group_id=1001\n", 3), 1);
	CHECK_CONTAINS(why, "uid 1001 mounted");
	/* No user_id, two of them, or not a number: cannot be told. */
	CHECK_INT(judge(BASE "3 2 0:50 / /f rw - fuse s rw,allow_other\n", 3), 1);
	CHECK_CONTAINS(why, "cannot be checked");
	CHECK_INT(judge(BASE "3 2 0:50 / /f rw - fuse s rw,user_id=0,user_id=5,allow_other\n", 3), 1);
	CHECK_CONTAINS(why, "cannot be checked");
	CHECK_INT(judge(BASE "3 2 0:50 / /f rw - fuse s rw,user_id=0x1,allow_other\n", 3), 1);
	CHECK_CONTAINS(why, "cannot be checked");
}

#define USER_FUSE "3 2 0:50 / /home/u/f rw - fuse.squashfuse_ll squashfuse_ll rw,user_id=1001,group_id=1001\n"

static void overlays(void)
{
	/* Lower, upper, lowerdir+ and datadir+ on the user's mount. */
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=/home/u/f/dir\n", 4), 1);
	CHECK_CONTAINS(why, "is on overlay at /ovl, with the layer /home/u/f/dir, which is on a FUSE file system "
			    "that uid 1001 mounted");
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /ovl rw - overlay overlay "
				       "rw,lowerdir=/home/a:/home/u/f:/home/b\n", 4), 1);
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=/home/a::/home/u/f\n", 4), 1);
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /ovl rw - overlay overlay "
				       "rw,lowerdir+=/home/a,datadir+=/home/u/f\n", 4), 1);
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /ovl rw - overlay overlay "
				       "rw,lowerdir=/home/a,upperdir=/home/u/f/up,workdir=/home/u/f/w\n", 4), 1);
	/* Layers elsewhere: fine. */
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /ovl rw - overlay overlay "
				       "rw,lowerdir=/home/a:/home/u/fx,upperdir=/home/up,workdir=/home/w,"
				       "redirect_dir=on,index=off,xino=off,metacopy=on\n", 4), 0);
	/* overlayfs' escapes: "\:" inside a name, commas as \054, spaces \040. */
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=/home/a\\134:/home/u/f\n", 4),
		  0);
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=/home/a\\054b:/home/u/f\n", 4),
		  1);
	CHECK_INT(judge(BASE "3 2 0:50 / /home/u/my\\040f rw - fuse s rw,user_id=1001,group_id=1001\n"
			     "4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=/home/u/my\\040f\n", 4), 1);
	/* An overlay on an overlay on the user's mount; a bind of the
	 * overlay (same superblock, same options). */
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /o1 rw - overlay overlay rw,lowerdir=/home/u/f\n"
				       "5 1 0:61 / /o2 rw - overlay overlay rw,lowerdir=/o1/x\n"
				       "6 1 0:61 /x /b rw - overlay overlay rw,lowerdir=/o1/x\n", 6), 1);
	CHECK_CONTAINS(why, "overlay at /b, with the layer /o1/x, which is on overlay at /o1, with the layer "
			    "/home/u/f, which is on a FUSE file system that uid 1001 mounted");
	/* Stacked mounts at the layer's mount point: each one counts. */
	CHECK_INT(judge(BASE "3 2 0:50 / /home/u rw - fuse s rw,user_id=1001,group_id=1001\n"
			     "5 3 0:51 / /home/u rw - tmpfs none rw\n"
			     "4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=/home/u/x\n", 4), 1);
	/* ecryptfs: its source is the directory below. */
	CHECK_INT(judge(BASE USER_FUSE "4 1 0:60 / /e rw - ecryptfs /home/u/f/priv rw,ecryptfs_sig=00\n", 4), 1);
}

static void overlays_not_understood(void)
{
	const char *lines[] = {
		"4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=l/abc\n",		/* relative */
		"4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=/home/../home/u/f\n",	/* .. */
		"4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=/home/./u\n",
		"4 1 0:60 / /ovl rw - overlay overlay rw,upperdir=/home/up\n",		/* no lower */
		"4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir_fd=/home/a,lowerdir=/home/b\n",
		"4 1 0:60 / /ovl rw - overlay overlay rw,newdir+=/x,lowerdir=/home/b\n",
		"4 1 0:60 / /ovl rw - aufs none rw,si=123\n",
		NULL,
	};

	for (int i = 0; lines[i]; i++) {
		char text[1024];
		snprintf(text, sizeof(text), BASE "%s", lines[i]);
		CHECK_INT(judge(text, 4), 1);
		CHECK_CONTAINS(why, "cannot be checked for a user's FUSE server");
	}
	/* Too deep: overlays each on the next, more than the bound. */
	char deep[8192] = BASE;
	for (int i = 0; i <= SQUASH_STACK_DEPTH_MAX + 1; i++) {
		size_t n = strlen(deep);
		snprintf(deep + n, sizeof(deep) - n, "%d 1 0:%d / /o%d rw - overlay overlay rw,lowerdir=/o%d\n",
			 10 + i, 60 + i, i, i + 1);
	}
	CHECK_INT(judge(deep, 10), 1);
	CHECK_CONTAINS(why, "stacked more than");
	/* An overlay whose layers' paths lead back to it: mounted in another
	 * view (a container's root after pivot_root, as tests/matrix makes). */
	CHECK_INT(judge("1 0 0:60 / / rw - overlay squash-x rw,lowerdir=/var/cache/root,"
			"upperdir=/var/cache/.writes/root/upper,workdir=/var/cache/.writes/root/work\n"
			"2 1 0:61 / /tmp rw - tmpfs tmp rw\n", 1), 1);
	CHECK_CONTAINS(why, "cannot be checked for a user's FUSE server (the layer /var/cache/root of overlay at / "
			    "is not visible in this mount namespace (mounted before a pivot_root or chroot?))");
	CHECK_INT(judge("1 0 0:60 / / rw - overlay squash-x rw,lowerdir=/var/cache/root\n"
			"2 1 0:61 / /tmp rw - tmpfs tmp rw\n", 2), 0);
	CHECK_INT(judge(BASE "4 1 0:60 / /o rw - overlay overlay rw,lowerdir=/o/a:/o/b:/o/c:/o/d\n", 4), 1);
	CHECK_CONTAINS(why, "is not visible in this mount namespace");
	/* Two overlays naming each other. */
	CHECK_INT(judge(BASE "4 1 0:60 / /o rw - overlay overlay rw,lowerdir=/p/a\n"
			     "5 1 0:61 / /p rw - overlay overlay rw,lowerdir=/o/a\n", 4), 1);
	CHECK_CONTAINS(why, "the layer /o/a of overlay at /p is not visible");
}

/* The kind of refusal, which a walk that only passes a mount looks at
 * (user_fuse_walk.c): cannot tell (a container's root), against is one
 * (a user's FUSE mount, a mount of another namespace). */
static void verdict_kinds(void)
{
	static const char root[] = "1 0 0:60 / / rw - overlay squash-x rw,lowerdir=/var/cache/root\n"
				   "2 1 0:61 / /tmp rw - tmpfs tmp rw\n"
				   "3 2 0:62 / /tmp/f rw - fuse.x x rw,user_id=1001,group_id=1001\n";
	struct squash_mount_table t;

	if (squash_mount_table_parse(strdup(root), &t) != 0) {
		CHECK(!"parsed");
		squash_mount_table_free(&t);
		return;
	}
	CHECK_INT(squash_user_fuse_verdict(&t, 1, false, why, sizeof(why)), SQUASH_FUSE_UNKNOWN);
	CHECK_INT(squash_user_fuse_verdict(&t, 2, false, why, sizeof(why)), SQUASH_FUSE_OK);
	CHECK_INT(squash_user_fuse_verdict(&t, 3, false, why, sizeof(why)), SQUASH_FUSE_REFUSED);
	CHECK_CONTAINS(why, "uid 1001 mounted");
	CHECK_INT(squash_user_fuse_verdict(&t, 77, false, why, sizeof(why)), SQUASH_FUSE_REFUSED);
	squash_mount_table_free(&t);
}

/* squashd's trusted walk: root's FUSE mounts count too, below an overlay
 * as well. */
static void any_fuse(void)
{
	const char *root_fuse = BASE "3 2 0:50 / /srv rw - fuse.s s rw,user_id=0,group_id=0,allow_other\n"
				     "4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=/srv/x\n";

	CHECK_INT(judge_as(root_fuse, 2, true), 0);
	CHECK_INT(judge_as(root_fuse, 3, true), 1);
	CHECK_STR(why, "is on a FUSE mount (fuse.s); squashd's walk enters none");
	CHECK_INT(judge_as(root_fuse, 4, false), 0);
	CHECK_INT(judge_as(root_fuse, 4, true), 1);
	CHECK_STR(why, "is on overlay at /ovl, with the layer /srv/x, which is on a FUSE mount (fuse.s); "
		       "squashd's walk enters none");
	CHECK_INT(judge_as(BASE "4 1 0:60 / /ovl rw - overlay overlay rw,lowerdir=x\n", 4, true), 1);
	CHECK_CONTAINS(why, "cannot be checked for FUSE mounts (a layer path 'x' that is not absolute and plain); "
			    "squashd's walk enters none");
	/* A container's root overlay (layers of another view): walked. */
	CHECK_INT(judge_as("1 0 0:60 / / rw - overlay squash-x rw,lowerdir=/var/cache/root\n", 1, true), 0);
	CHECK_INT(judge_as(root_fuse, 99, true), 1);
	CHECK_STR(why, "is on a mount (id 99) that is not in squashd's mountinfo");
}

int main(void)
{
	any_fuse();
	top_mounts();
	crafted_names();
	overlays();
	overlays_not_understood();
	verdict_kinds();
	return unit_exit_code();
}
