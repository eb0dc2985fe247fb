/** Project restrictions and limits: the checks behind ProjectsService.vet and project config edits. */
export { PolicyGate, hasPolicy, vetProfileChanges } from './gate.js';
export { vetProposal, vetProjectConfig } from './vet.js';
export { emptyContents, type ProjectContents, type InstanceEntry, type ProfileEntry, type VolumeEntry } from './contents.js';
export { checkRestrictions, RESTRICTION_DEFAULTS } from './restrictions.js';
export { AGGREGATE_LIMITS, COUNT_LIMITS, aggregateTotal, countOf } from './limits.js';
