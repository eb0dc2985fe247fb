/** Progress reporting of long operations, as the reference shows it. */
export * from './progress.js';
