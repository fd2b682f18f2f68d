ALTER TABLE `messages` ADD `mentions` text;--> statement-breakpoint
ALTER TABLE `messages` ADD `mention_keys` text;--> statement-breakpoint
CREATE INDEX `messages_mentions_pending` ON `messages` (`room`,`seq`) WHERE mention_keys IS NULL;