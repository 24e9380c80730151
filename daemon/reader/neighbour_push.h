/* The small files after the one a READ asks for, stored into the kernel's
 * page cache before that READ is answered (FUSE_NOTIFY_STORE), while a
 * client reads the image's files in the order mksquashfs packed them.
 *
 * A small file lies in a fragment block with the files packed after it
 * (directory order), and its inode is followed by theirs in the inode
 * table. A client reading a tree file after file (md5sum of every file,
 * tar, cp -r, rsync) sends one READ per file, each a round trip to the
 * reader that costs more than the file's bytes. Once a READ asks for the
 * file right after the one read (or stored) last, the files after it in
 * the same fragment block, already decompressed, are stored into their
 * inodes' page cache, and the client reads them without asking. A client
 * that jumps (an import, a lookup here and there) starts nothing.
 *
 * Storing waits for a page the kernel holds locked while a READ of it is
 * on its way to the reader (a second client reading the same file at
 * once), so it runs before the answer, while the client that asked waits
 * for it and cannot start on the next file, stops as soon as any request
 * waits on the connection, runs in one thread per image at a time, and
 * only where the session has more than one worker to answer the READ it
 * might wait for (docs/architecture.md, "The FUSE reader"). */
#ifndef SQUASH_READER_NEIGHBOUR_PUSH_H
#define SQUASH_READER_NEIGHBOUR_PUSH_H

#include <stdint.h>

struct fuse_session;
struct image;
struct inode;

/* Files after one at most looked at per READ; a fragment block of 128
 * KiB holds a few dozen small files. */
#define NEIGHBOUR_PUSH_SCAN 64

/* For a READ of file from its start, before it is answered: stores the
 * files after it in the same fragment block into the page cache of se's
 * kernel when the reads go through the image in its order. Returns the
 * files stored. */
unsigned neighbour_push(struct fuse_session *se, struct image *img, const struct inode *file);

/* For a request that comes when a client opens file (python's open asks
 * isatty() of every file it opens, an IOCTL the kernel forwards each time:
 * it never remembers ENOSYS for it), before it is answered: stores the
 * bytes of a small file not stored or read whole before into its page
 * cache, so that the READ the client was about to send is not needed.
 * Only after a LOOKUP was answered can the kernel take a store (the inode
 * is made by the client once it gets the answer), and only while the
 * client waits can it not race the client's own READ; an IOCTL is both.
 * Returns 1 when stored. */
unsigned open_push(struct fuse_session *se, struct image *img, const struct inode *file);

#endif
