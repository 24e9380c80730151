/* Closes every descriptor from lowfd up, in a child before exec. */
#ifndef SQUASHD_CLOSE_FROM_H
#define SQUASHD_CLOSE_FROM_H

void close_from(int lowfd);

#endif
