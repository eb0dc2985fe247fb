/** Bytes allocated under a tree, as `du` counts them: the sdk's, where qgroups do not answer. */
export { treeUsage } from '../../sdk/index.js';
