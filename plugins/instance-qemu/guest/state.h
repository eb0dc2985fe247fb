/* What the guest reports of itself: processes, memory, CPU time, network interfaces. */
#ifndef CORRAL_STATE_H
#define CORRAL_STATE_H

#include "buffer.h"

void state_report(struct buffer *reply);

#endif
