export * from './bytes';
export * from './jcs';
export * from './merkle';
export * from './checkpoint';
export * from './ed25519';
export * from './event';
