/* Monotonic milliseconds, for the deadlines that bound every wait. */
#ifndef SQUASH_CLOCK_H
#define SQUASH_CLOCK_H

long long squash_now_ms(void);

#endif
