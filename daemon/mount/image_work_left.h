/* What squashd leaves running on the file system of a user's image once
 * a request is done with it: the opener (image_open.c), which exits
 * after its answer or is killed at the deadline, and the detached close
 * of an image descriptor (util/close_detached.h). Both send the image's
 * file system a request (FUSE_FLUSH at a close; LOOKUP, OPEN or READ of
 * an opener killed while waiting) that a hung server never answers, and
 * a kill cannot end one the server has read: each then holds a task of
 * squashd's for as long as that file system hangs. A user naming images
 * there in a loop would fill the node's tasks and squashd's memory, so
 * each user may leave at most IMAGE_WORK_LEFT_PER_USER of them; while they
 * are all taken, that user's next image is refused before it is opened.
 * Other users' opens never look at them. */
#ifndef SQUASHD_IMAGE_WORK_LEFT_H
#define SQUASHD_IMAGE_WORK_LEFT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define IMAGE_WORK_LEFT_PER_USER 16

/* Keeps an eye on uid's opener by pidfd (taken) until it exits. */
void image_work_left_opener(uid_t uid, int pidfd);

/* uid's openers not yet exited and closes not yet returned. */
unsigned image_work_left(uid_t uid);

/* true, with why, when uid's work left takes the whole budget (root's
 * never does: its images are the admin's). */
bool image_work_left_refuses(uid_t uid, char *why, size_t whylen);

struct image_work_use {
	uid_t uid;
	unsigned left;
};

/* Up to max users with work left; how many were written. */
size_t image_work_left_each(struct image_work_use *out, size_t max);

#endif
